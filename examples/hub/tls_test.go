package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/ws/wsclient"
)

// selfSigned makes a certificate for 127.0.0.1 and localhost, signed by
// its own key, named cn; it returns its PEM files' contents and a pool
// that trusts it (and nothing else).
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), pool
}

// writePair replaces the files the way a renewal does: write aside, rename.
func writePair(t *testing.T, certFile, keyFile string, certPEM, keyPEM []byte) {
	t.Helper()
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, keyPEM}, {certFile, certPEM}} {
		tmp := f.path + ".new"
		require.NoError(t, os.WriteFile(tmp, f.data, 0o600))
		require.NoError(t, os.Rename(tmp, f.path))
	}
}

// servedCN is the common name of the certificate the hub presents.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// dialWSS connects over wss:// trusting pool only, and publishes once.
func dialWSS(ctx context.Context, addr string, pool *x509.CertPool) error {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	c, err := wsclient.Dial(ctx, "wss://"+addr+"/ws", &wsclient.Options{Token: "tok", HTTPClient: hc, DisableReconnect: true})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Publish(ctx, "tls.check", []byte(`{"ok":true}`))
	return err
}

// TestHubTLS: with -tls-cert and -tls-key the hub serves wss:// and
// HTTPS; it serves a renewed pair once the files change, and at once on
// SIGHUP; a client that trusts only the old certificate is refused then.
func TestHubTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c1, k1, pool1 := selfSigned(t, "first")
	writePair(t, certFile, keyFile, c1, k1)

	addr, logs, stop := runHub(t, map[string]string{"WS_TOKEN": "tok"}, "-tls-cert", certFile, "-tls-key", keyFile)
	defer stop()
	assert.Contains(t, logs.String(), "wss://"+addr+"/ws")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	require.NoError(t, dialWSS(ctx, addr, pool1), "wss:// with the generated certificate")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool1}}}
	resp, err := hc.Get("https://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	hc.CloseIdleConnections()
	resp, err = http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP on the TLS listener is refused")

	// A renewal replaces the files: the next handshakes present it.
	c2, k2, pool2 := selfSigned(t, "second")
	writePair(t, certFile, keyFile, c2, k2)
	require.Eventually(t, func() bool { return servedCN(t, addr) == "second" }, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, dialWSS(ctx, addr, pool2))
	assert.Error(t, dialWSS(ctx, addr, pool1), "the old certificate is no longer served")
	assert.Contains(t, logs.String(), "certificate reloaded")

	// SIGHUP reloads without waiting for the next look at the files.
	c3, k3, pool3 := selfSigned(t, "third")
	writePair(t, certFile, keyFile, c3, k3)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return servedCN(t, addr) == "third" }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, dialWSS(ctx, addr, pool3))
	assert.Contains(t, logs.String(), "why=SIGHUP")

	// A broken pair is not served: the previous certificate stays.
	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "certificate not reloaded") }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "third", servedCN(t, addr))
}

// TestHubTLSFlags: -tls-cert and -tls-key go together, and files that do
// not load stop the hub before it listens, naming the flags.
func TestHubTLSFlags(t *testing.T) {
	none := func(string) string { return "" }
	_, err := parseFlags([]string{"-tls-cert", "c.pem"}, none, nil)
	assert.ErrorContains(t, err, "-tls-cert and -tls-key")
	_, err = parseFlags([]string{"-tls-key", "k.pem"}, none, nil)
	assert.ErrorContains(t, err, "-tls-cert and -tls-key")

	dir := t.TempDir()
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", "memory", "-tls-cert", filepath.Join(dir, "none.pem"), "-tls-key", filepath.Join(dir, "none.key")},
		func(k string) string { return map[string]string{"WS_TOKEN": "tok"}[k] }, &syncBuffer{}, func(string) { t.Error("the hub listened") })
	assert.ErrorContains(t, err, "-tls-cert")
	assert.ErrorContains(t, err, "none.pem")
}
