// fanout.go is the fan-out bench's measuring side: a server in a child
// process, many subscriber connections and one publisher in this one.
// The same file is in examples/bench (promlib's gateway) and in
// examples/bench/peers (centrifuge), so that both measure alike;
// TestFanoutHarnessSame checks that the two copies do not drift. What
// differs between the systems is a fanProto (the frames) and the server
// the child runs.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// fanConfig is one fan-out run: Conns subscribers of one topic, Rate
// events/s published for Duration, each payload Payload bytes or more.
type fanConfig struct {
	Conns    int
	Rate     float64
	Duration time.Duration
	Payload  int
}

// events is how many events the run publishes: Rate x Duration, 1 or more.
func (c fanConfig) events() int { return max(1, int(math.Round(c.Rate*c.Duration.Seconds()))) }

// fanProto is one system's frames, over raw WebSocket connections.
type fanProto interface {
	// subscribe makes s's connection a subscriber of the topic (with
	// whatever handshake the system needs) and returns once the server
	// has answered; the connection is read by fanSub.read afterwards.
	subscribe(ctx context.Context, c *websocket.Conn, s *fanSub) error
	// startPublisher makes c the publishing connection.
	startPublisher(ctx context.Context, c *websocket.Conn) error
	// appendPublish appends to b the frame that publishes payload p, the
	// k-th publish of the run (from 0).
	appendPublish(b []byte, k int, p []byte) []byte
	// publisherMessage reads a message the publishing connection got:
	// how many publishes it answers and the first refusal among them,
	// and appends to reply what the connection must write back.
	publisherMessage(data []byte, reply []byte) (answered int, out []byte, err error)
	// message reads a message subscriber s got, received at now (Unix
	// ns): it calls s.event for each event, s.gap for each event the
	// server said it skips, s.errFrame for an error, and appends to reply
	// what the connection must write back (acks, pongs).
	message(s *fanSub, data []byte, now int64, reply []byte) []byte
}

// fanSub is one subscriber connection and what it received.
type fanSub struct {
	i      int
	counts []uint8   // deliveries of each event, saturating at 255
	lats   []float32 // ms from each event's intended publish time to its first delivery
	got    atomic.Int64
	gaps   int // events the server said it would not deliver
	errs   int // error frames
	// closed is set when the server ended the connection during the run,
	// with code (websocket close code, -1 for none).
	closed atomic.Bool
	code   int
}

// event records event i, published at sent (Unix ns), received at now.
func (s *fanSub) event(i int, sent, now int64) {
	if i < 0 || i >= len(s.counts) {
		return
	}
	c := s.counts[i]
	if c < math.MaxUint8 {
		s.counts[i] = c + 1
	}
	if c == 0 {
		s.lats = append(s.lats, float32(now-sent)/float32(time.Millisecond))
		s.got.Add(1)
	}
}

//lint:ignore U1000 the centrifuge side of this shared file has no gaps
func (s *fanSub) gap(n int)  { s.gaps += n }
func (s *fanSub) errFrame()  { s.errs++ }
func (s *fanSub) done() bool { return s.closed.Load() }

// read reads s's connection until it ends; quit says the run is over (a
// close then is the bench's own).
func (s *fanSub) read(c *websocket.Conn, p fanProto, quit *atomic.Bool) {
	var buf bytes.Buffer
	var reply []byte
	for {
		_, r, err := c.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err == nil {
			reply = p.message(s, buf.Bytes(), time.Now().UnixNano(), reply[:0])
			if len(reply) > 0 {
				err = c.Write(context.Background(), websocket.MessageText, reply)
			}
		}
		if err != nil {
			if !quit.Load() {
				s.code = int(websocket.CloseStatus(err))
				s.closed.Store(true)
				if fanEnded.Add(1) <= 3 {
					fmt.Fprintf(os.Stderr, "fanout: connection %d ended: %v\n", s.i, err)
				}
			}
			return
		}
	}
}

// fanEnded counts the connections the server ended, to say why of the
// first few.
var fanEnded atomic.Int64

// appendFanPayload appends the payload of event i published at sent
// (Unix ns): {"i":7,"t":1764000000000000000,"p":"xx..."}, padded with x to
// size bytes when it is shorter.
func appendFanPayload(b []byte, i int, sent int64, size int) []byte {
	start := len(b)
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, sent, 10)
	b = append(b, `,"p":"`...)
	for len(b)-start < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// fanPayload finds a payload of appendFanPayload in a frame and returns
// its event index and publish time.
func fanPayload(frame []byte) (i int, sent int64, ok bool) {
	k := bytes.Index(frame, []byte(`{"i":`))
	if k < 0 {
		return 0, 0, false
	}
	rest := frame[k+len(`{"i":`):]
	n, rest, ok := fanDigits(rest)
	if !ok || !bytes.HasPrefix(rest, []byte(`,"t":`)) {
		return 0, 0, false
	}
	t, _, ok := fanDigits(rest[len(`,"t":`):])
	return int(n), t, ok
}

func fanDigits(b []byte) (n int64, rest []byte, ok bool) {
	k := 0
	for ; k < len(b) && b[k] >= '0' && b[k] <= '9'; k++ {
		n = n*10 + int64(b[k]-'0')
	}
	return n, b[k:], k > 0
}

// FanoutFigures are the JSON line's fan-out fields; lost, duplicates and
// the latency percentiles go in the line's common fields.
type FanoutFigures struct {
	// Subscription is how each connection subscribes: "live", or
	// "group-per-conn" (a durable consumer group each, acking every event).
	Subscription string  `json:"subscription"`
	DurationS    float64 `json:"duration_s"`
	// MaxMs is the largest publish -> receive latency of any (connection,
	// event) pair.
	MaxMs float64 `json:"max_ms"`
	// ConnectS is the time to open and subscribe all the connections.
	ConnectS float64 `json:"connect_s"`
	// Disconnected are the connections the server ended during the run,
	// by close code; their missing events count as lost.
	Disconnected int            `json:"disconnected"`
	CloseCodes   map[string]int `json:"close_codes,omitempty"`
	// GapEvents are the events the server told a subscriber it skipped
	// (counted as lost too); ErrFrames the error frames subscribers got.
	GapEvents int `json:"gap_events"`
	ErrFrames int `json:"err_frames"`
	// PublishErrors are the publishes refused, not answered, or not sent
	// because the server ended the publishing connection.
	PublishErrors int `json:"publish_errors"`
	// The server process's resident set after a collection with memory
	// returned to the system: before any connection, once every
	// connection is subscribed and idle, and at the end (every event
	// delivered or given up on); its peak (VmHWM) over the whole run.
	HubRSSStartMB float64 `json:"hub_rss_start_mb"`
	HubRSSIdleMB  float64 `json:"hub_rss_idle_mb"`
	HubRSSEndMB   float64 `json:"hub_rss_end_mb"`
	HubPeakRSSMB  float64 `json:"hub_peak_rss_mb"`
	// BytesPerConn is (idle - start) / conns; EndBytesPerConn (end -
	// start) / conns, with the buffers a delivering connection keeps.
	BytesPerConn      float64 `json:"bytes_per_conn"`
	EndBytesPerConn   float64 `json:"end_bytes_per_conn"`
	GoroutinesPerConn float64 `json:"goroutines_per_conn"`
	// CPU seconds (user + system) of the server process: setting up the
	// connections, publishing and delivering, and the two together; and
	// of this process (the clients and the publisher) while publishing.
	HubCPUConnectS float64 `json:"hub_cpu_connect_s"`
	HubCPURunS     float64 `json:"hub_cpu_run_s"`
	HubCPUS        float64 `json:"hub_cpu_s"`
	ClientCPURunS  float64 `json:"client_cpu_run_s"`
	NoFileSoft     uint64  `json:"nofile_soft"`
	NoFileHard     uint64  `json:"nofile_hard"`
}

// fanOutcome is what a run measured.
type fanOutcome struct {
	FanoutFigures
	Events, Lost, Duplicates int
	P50Ms, P99Ms             float64
	PublishPerS, DeliverPerS float64
}

// fanServerSample is what the server child reports of itself.
type fanServerSample struct {
	RSS        uint64 `json:"rss"`
	HWM        uint64 `json:"hwm"`
	CPUNs      int64  `json:"cpu_ns"`
	Goroutines int    `json:"goroutines"`
}

// fanServer is the server child process.
type fanServer struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startFanServer runs this program again as the server, with env=value
// in its environment (the program's main runs serveFanChild then), and
// reads the URL it listens on.
func startFanServer(ctx context.Context, env, value string) (*fanServer, error) {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &fanServer{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := s.out.ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "url ")
	if !ok {
		s.stop()
		return nil, fmt.Errorf("server process: %q %v", line, err)
	}
	s.url = url
	return s, nil
}

// sample asks the server for its figures.
func (s *fanServer) sample() (fanServerSample, error) {
	var v fanServerSample
	if _, err := io.WriteString(s.stdin, "sample\n"); err != nil {
		return v, fmt.Errorf("server process: %w", err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return v, fmt.Errorf("server process: %w", err)
	}
	return v, json.Unmarshal([]byte(line), &v)
}

// stop closes the server's stdin, which ends it, and waits for it.
func (s *fanServer) stop() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// serveFanChild is the server process: it serves h on a free loopback
// port, writes "url ws://..." to stdout, answers each "sample" line of
// stdin with a fanServerSample, and when stdin ends calls shutdown and
// returns.
func serveFanChild(h http.Handler, shutdown func(context.Context)) error {
	if _, _, err := raiseNoFile(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("url ws://%s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "sample" {
			continue
		}
		cpu := cpuTime()
		runtime.GC()
		debug.FreeOSMemory()
		v := fanServerSample{RSS: statusBytes("VmRSS"), HWM: statusBytes("VmHWM"), CPUNs: int64(cpu), Goroutines: runtime.NumGoroutine()}
		line, _ := json.Marshal(v)
		fmt.Printf("%s\n", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shutdown(ctx)
	_ = srv.Close()
	return nil
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// statusBytes reads a kB field of /proc/self/status (VmRSS, VmHWM) in
// bytes; 0 where there is none.
func statusBytes(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fanDialers is how many connections are being opened at once.
const fanDialers = 64

// fanStall is how long a run waits, after the last publish, for a
// delivery or an answer before what is missing counts as lost.
const fanStall = 15 * time.Second

// runFanout runs the fan-out against srv: it opens cfg.Conns subscriber
// connections with p, measures the server before and after, publishes
// cfg.events() events over one more connection, paced at cfg.Rate from
// their intended send times (the time each payload carries, so that a
// late publisher adds its delay to the latencies), waits for every
// delivery (until nothing has come for fanStall) and counts.
func runFanout(ctx context.Context, cfg fanConfig, p fanProto, srv *fanServer, subscription string) (*fanOutcome, error) {
	o := &fanOutcome{FanoutFigures: FanoutFigures{Subscription: subscription, DurationS: cfg.Duration.Seconds()}}
	n, events := cfg.Conns, cfg.events()
	o.Events = events
	soft, hard, err := raiseNoFile()
	if err != nil {
		return nil, err
	}
	o.NoFileSoft, o.NoFileHard = soft, hard
	fmt.Fprintf(os.Stderr, "fanout: open files (ulimit -n): soft %d, hard %d; %d connections need about %d in each of the two processes\n", soft, hard, n, n+64)
	if uint64(n+64) > soft {
		return nil, fmt.Errorf("-conns %d needs about %d open files per process, but RLIMIT_NOFILE allows %d (hard limit %d): raise it (ulimit -n) or lower -conns", n, n+64, soft, hard)
	}
	s0, err := srv.sample()
	if err != nil {
		return nil, err
	}

	subs := make([]*fanSub, n)
	conns := make([]*websocket.Conn, n)
	var quit atomic.Bool
	var readers sync.WaitGroup
	defer func() {
		quit.Store(true)
		for _, c := range conns {
			if c != nil {
				_ = c.CloseNow()
			}
		}
		readers.Wait()
	}()
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var dialers sync.WaitGroup
	for range min(fanDialers, n) {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				s := &fanSub{i: i, counts: make([]uint8, events), lats: make([]float32, 0, events)}
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				c, _, err := websocket.Dial(sctx, srv.url, nil)
				if err == nil {
					c.SetReadLimit(1 << 20)
					if err = p.subscribe(sctx, c, s); err != nil {
						_ = c.CloseNow()
					}
				}
				cancel()
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("connection %d: %w", i, err))
					return
				}
				subs[i], conns[i] = s, c
				readers.Add(1)
				go func() {
					defer readers.Done()
					s.read(c, p, &quit)
				}()
			}
		}()
	}
	dialers.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return nil, err
	}
	o.ConnectS = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "fanout: %d connections subscribed in %.2f s\n", n, o.ConnectS)
	time.Sleep(time.Second) // let the server settle: handshakes' garbage, groups' first reads
	s1, err := srv.sample()
	if err != nil {
		return nil, err
	}

	pc, _, err := websocket.Dial(ctx, srv.url, nil)
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	defer pc.CloseNow()
	pc.SetReadLimit(1 << 20)
	if err := p.startPublisher(ctx, pc); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	var answered atomic.Int64
	var pubErr atomic.Value
	var pubErrs atomic.Int64
	go func() {
		var reply []byte
		for {
			_, data, err := pc.Read(context.Background())
			if err != nil {
				if !quit.Load() {
					fmt.Fprintf(os.Stderr, "fanout: the publishing connection ended: %v\n", err)
				}
				return
			}
			k, out, err := p.publisherMessage(data, reply[:0])
			answered.Add(int64(k))
			if err != nil {
				pubErrs.Add(1)
				pubErr.CompareAndSwap(nil, err)
			}
			if len(out) > 0 {
				_ = pc.Write(context.Background(), websocket.MessageText, out)
			}
			reply = out
		}
	}()

	cpu0 := cpuTime()
	period := time.Duration(float64(time.Second) / cfg.Rate)
	pubStart := time.Now()
	var frame, payload []byte
	for i := range events {
		due := pubStart.Add(time.Duration(i) * period)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		payload = appendFanPayload(payload[:0], i, due.UnixNano(), cfg.Payload)
		frame = p.appendPublish(frame[:0], i, payload)
		if err := pc.Write(ctx, websocket.MessageText, frame); err != nil {
			// The server ended the publishing connection: the events
			// left are not published, and lost for every subscriber.
			fmt.Fprintf(os.Stderr, "fanout: publish %d: %v; %d events left unpublished\n", i, err, events-i)
			pubErrs.Add(int64(events - i))
			answered.Add(int64(events - i))
			break
		}
	}
	pubDur := time.Since(pubStart)

	// Wait until every subscriber still connected has every event, or
	// nothing has come for fanStall (what is missing then is lost).
	var total, progress int64
	lastAt := time.Now()
	for {
		acks := answered.Load()
		total = 0
		complete := acks >= int64(events)
		for _, s := range subs {
			g := s.got.Load()
			total += g
			if g < int64(events) && !s.done() {
				complete = false
			}
		}
		if complete {
			break
		}
		if total+acks != progress {
			progress, lastAt = total+acks, time.Now()
		}
		if time.Since(lastAt) > fanStall {
			fmt.Fprintf(os.Stderr, "fanout: gave up waiting, nothing came for %v: %d of %d publishes answered, %d of %d deliveries\n",
				fanStall, acks, events, total, int64(n)*int64(events))
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	runDur := time.Since(pubStart)
	o.ClientCPURunS = (cpuTime() - cpu0).Seconds()
	s2, err := srv.sample()
	if err != nil {
		return nil, err
	}

	quit.Store(true)
	for _, c := range conns {
		_ = c.CloseNow()
	}
	readers.Wait()
	conns = nil

	o.PublishPerS = float64(events) / pubDur.Seconds()
	o.DeliverPerS = float64(total) / runDur.Seconds()
	if err, _ := pubErr.Load().(error); err != nil {
		fmt.Fprintf(os.Stderr, "fanout: a publish was refused: %v\n", err)
	}
	// Publishes never answered (the server ended the publishing
	// connection, or never got to them) count as failed.
	o.PublishErrors = int(pubErrs.Load() + max(0, int64(events)-answered.Load()))
	lats := make([]float32, 0, total)
	for _, s := range subs {
		for _, c := range s.counts {
			switch {
			case c == 0:
				o.Lost++
			case c > 1:
				o.Duplicates += int(c) - 1
			}
		}
		lats = append(lats, s.lats...)
		o.GapEvents += s.gaps
		o.ErrFrames += s.errs
		if s.done() {
			o.Disconnected++
			if o.CloseCodes == nil {
				o.CloseCodes = map[string]int{}
			}
			o.CloseCodes[strconv.Itoa(s.code)]++
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		at := func(p float64) float64 { return float64(lats[int(float64(len(lats)-1)*p/100)]) }
		o.P50Ms, o.P99Ms, o.MaxMs = at(50), at(99), float64(lats[len(lats)-1])
	}
	const mb = 1 << 20
	o.HubRSSStartMB, o.HubRSSIdleMB, o.HubRSSEndMB = float64(s0.RSS)/mb, float64(s1.RSS)/mb, float64(s2.RSS)/mb
	o.HubPeakRSSMB = float64(s2.HWM) / mb
	o.BytesPerConn = (float64(s1.RSS) - float64(s0.RSS)) / float64(n)
	o.EndBytesPerConn = (float64(s2.RSS) - float64(s0.RSS)) / float64(n)
	o.GoroutinesPerConn = float64(s1.Goroutines-s0.Goroutines) / float64(n)
	o.HubCPUConnectS = time.Duration(s1.CPUNs - s0.CPUNs).Seconds()
	o.HubCPURunS = time.Duration(s2.CPUNs - s1.CPUNs).Seconds()
	o.HubCPUS = o.HubCPUConnectS + o.HubCPURunS
	return o, nil
}
