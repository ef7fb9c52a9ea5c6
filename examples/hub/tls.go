package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// certReloader serves the certificate of a pair of PEM files and loads
// them again when either file's modification time or size changes (it
// looks at most once a second, on a handshake) or on SIGHUP. A pair that
// fails to load is logged and the previous certificate kept, so that a
// renewal caught half-written does not take the hub down.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// newCertReloader loads the pair once; its error names the flag.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", certFile, keyFile, err)
	}
	return r, nil
}

// load reads the pair and, if it is good, serves it from now on.
func (r *certReloader) load() error {
	var stamp [2]fileStamp
	var err error
	for i, f := range []string{r.certFile, r.keyFile} {
		if stamp[i], err = stampOf(f); err != nil {
			return err
		}
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cert, r.stamp, r.checked = &cert, stamp, r.now()
	r.mu.Unlock()
	return nil
}

// reload loads the pair again, logging the outcome.
func (r *certReloader) reload(why string) {
	if err := r.load(); err != nil {
		r.log.Error("tls: certificate not reloaded; serving the previous one", "why", why, "cert", r.certFile, "key", r.keyFile, "err", err)
		return
	}
	r.log.Info("tls: certificate reloaded", "why", why, "cert", r.certFile)
}

// changed says whether either file changed since it was loaded, looking
// at most once a second.
func (r *certReloader) changed() bool {
	r.mu.Lock()
	now := r.now()
	if now.Sub(r.checked) < time.Second {
		r.mu.Unlock()
		return false
	}
	r.checked = now
	loaded := r.stamp
	r.mu.Unlock()
	for i, f := range []string{r.certFile, r.keyFile} {
		if s, err := stampOf(f); err == nil && s != loaded[i] {
			return true
		}
	}
	return false
}

// GetCertificate is the tls.Config hook.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if r.changed() {
		r.reload("files changed")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// watchSIGHUP reloads on every SIGHUP until the returned stop is called.
func (r *certReloader) watchSIGHUP() (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-hup:
				r.reload("SIGHUP")
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}

// tlsConfig is the server's TLS: TLS 1.2 or later, HTTP/1.1 (WebSocket
// upgrades are HTTP/1.1), the certificate of r.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: r.GetCertificate,
	}
}
