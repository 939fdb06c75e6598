// Package amqp091 drives SmartGo's AMQP 0-9-1 server with unmodified
// RabbitMQ clients: github.com/rabbitmq/amqp091-go v1.16.0 in process,
// Debian's python3-pika and npm's amqplib 2.3.1 (interop/amqp-node) as
// child processes.
//
// By default the tests build cmd/smartgo and run `smartgo standalone` on
// free loopback ports (one process shared by the tests that only need a
// server, one of their own for those that restart it or need a
// credentials file). With SMARTGO_AMQP_URL set (for example
// amqp://guest:guest@127.0.0.1:35672/ for a RabbitMQ started by hand) they
// run against that server instead, and the tests that must start or
// restart the server themselves skip. Every test names its exchanges and
// queues after itself plus a random suffix, so runs never meet each
// other's leftovers on a long-lived server.
package amqp091

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testnet"
)

// externalURL is SMARTGO_AMQP_URL: a server the tests use instead of a
// standalone of their own.
var externalURL = os.Getenv("SMARTGO_AMQP_URL")

// server is an AMQP server under test: a `smartgo standalone` process
// (proc set) or the server at SMARTGO_AMQP_URL.
type server struct {
	url  string // amqp://user:pass@host:port/
	proc *standalone
}

var (
	sharedMu  sync.Mutex
	sharedSrv *standalone // started by the first test that needs it; stopped by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	sharedMu.Lock()
	if sharedSrv != nil {
		if err := sharedSrv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "shared smartgo standalone: %v\nlog: %s\n", err, sharedSrv.log)
			if code == 0 {
				code = 1
			}
		} else if code != 0 {
			fmt.Fprintf(os.Stderr, "shared smartgo standalone log: %s\n", sharedSrv.log)
		}
	}
	sharedMu.Unlock()
	os.Exit(code)
}

// sharedServer is the server most tests use: SMARTGO_AMQP_URL, or one
// standalone process for the whole test binary.
func sharedServer(t testing.TB) *server {
	t.Helper()
	if externalURL != "" {
		return &server{url: externalURL}
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedSrv == nil {
		// Its files outlive any one test: not t.TempDir.
		dir, err := os.MkdirTemp("", "smartgo-amqp091-")
		if err != nil {
			t.Fatal(err)
		}
		s := newStandalone(t, dir)
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		sharedSrv = s
	}
	return &server{url: sharedSrv.url("guest", "guest"), proc: sharedSrv}
}

// ownServer starts a standalone for t alone (extra: more -set flags),
// stopped at t's cleanup; it skips with SMARTGO_AMQP_URL set.
func ownServer(t testing.TB, extra ...string) *server {
	t.Helper()
	if externalURL != "" {
		t.Skip("starts and restarts its own smartgo standalone; SMARTGO_AMQP_URL is set")
	}
	s := newStandalone(t, t.TempDir(), extra...)
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			t.Logf("smartgo log (%s):\n%s", s.log, tail(string(data), 8000))
		}
	})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return &server{url: s.url("guest", "guest"), proc: s}
}

// standalone is a `smartgo standalone` process built from this checkout,
// with its data in dir and AMQP on a free loopback port.
type standalone struct {
	bin, dir string
	amqp     string // host:port
	args     []string
	log      string // the current run's combined output

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run's process exited
	exitErr error         // read after exited
	runs    int
}

func newStandalone(t testing.TB, dir string, extra ...string) *standalone {
	t.Helper()
	bin := sharedBinary(t)
	ports := testnet.FreePorts(t, 4)
	s := &standalone{bin: bin, dir: dir, amqp: fmt.Sprintf("127.0.0.1:%d", ports[3])}
	s.args = []string{"standalone", "-data", filepath.Join(dir, "data"),
		"-set", fmt.Sprintf("registry.listen=127.0.0.1:%d", ports[0]),
		"-set", fmt.Sprintf("broker.listen=127.0.0.1:%d", ports[1]),
		"-set", fmt.Sprintf("bridge.listen=127.0.0.1:%d", ports[2]),
		"-set", "amqp.listen=" + s.amqp,
		"-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=64MiB", "-set", "log.level=info"}
	for _, e := range extra {
		s.args = append(s.args, "-set", e)
	}
	return s
}

func (s *standalone) url(user, pass string) string {
	return fmt.Sprintf("amqp://%s:%s@%s/", user, pass, s.amqp)
}

// start runs the process (again, on the same ports and data) and waits
// until it says it runs and its AMQP port accepts connections.
func (s *standalone) start() error {
	s.runs++
	s.log = filepath.Join(s.dir, fmt.Sprintf("smartgo-%d.log", s.runs))
	logf, err := os.Create(s.log)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		_ = logf.Close()
		return err
	}
	cmd, exited := s.cmd, make(chan struct{})
	s.exited = exited
	go func() { s.exitErr = cmd.Wait(); _ = logf.Close(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fileContains(s.log, "standalone running") {
			c, err := net.DialTimeout("tcp", s.amqp, time.Second)
			if err == nil {
				_ = c.Close()
				return nil
			}
		}
		select {
		case <-exited:
			data, _ := os.ReadFile(s.log)
			return fmt.Errorf("smartgo standalone exited (%v) before it served AMQP:\n%s", s.exitErr, tail(string(data), 8000))
		case <-time.After(20 * time.Millisecond): // the log has no wake-up: look again
		}
		if time.Now().After(deadline) {
			_ = s.cmd.Process.Kill()
			<-exited
			data, _ := os.ReadFile(s.log)
			return fmt.Errorf("smartgo standalone did not serve AMQP on %s within 30 s:\n%s", s.amqp, tail(string(data), 8000))
		}
	}
}

// stop ends the process with SIGINT (SIGKILL after 15 s) and reports an
// exit that was not clean.
func (s *standalone) stop() error {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
		if s.exitErr != nil {
			return fmt.Errorf("smartgo standalone exited with %v", s.exitErr)
		}
		return nil
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("smartgo standalone did not stop within 15 s of SIGINT")
	}
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (s *standalone) kill9() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

func fileContains(path, text string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), text)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// uniq is a name for t's exchanges and queues: the test's name, what,
// and a random suffix.
func uniq(t testing.TB, what string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return name + "." + what + "." + hex.EncodeToString(b[:])
}

// dial connects amqp091-go to s and closes the connection at cleanup.
func (s *server) dial(t testing.TB) *amqp.Connection {
	t.Helper()
	return s.dialConfig(t, amqp.Config{})
}

func (s *server) dialConfig(t testing.TB, cfg amqp.Config) *amqp.Connection {
	t.Helper()
	if cfg.Dial == nil {
		cfg.Dial = amqp.DefaultDial(10 * time.Second)
	}
	c, err := amqp.DialConfig(s.url, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", s.url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// channel opens a channel on c.
func channel(t testing.TB, c *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	return ch
}

// declareQueue declares a non-durable, auto-delete-free queue named
// after t and deletes it at cleanup (through a connection of its own:
// the test's may be gone by then).
func (s *server) declareQueue(t testing.TB, ch *amqp.Channel, what string, durable bool, args amqp.Table) string {
	t.Helper()
	q, err := ch.QueueDeclare(uniq(t, what), durable, false, false, false, args)
	if err != nil {
		t.Fatalf("declare queue %s: %v", what, err)
	}
	s.cleanupQueue(t, q.Name)
	return q.Name
}

func (s *server) cleanupQueue(t testing.TB, name string) {
	t.Cleanup(func() { s.tidy(func(ch *amqp.Channel) { _, _ = ch.QueueDelete(name, false, false, false) }) })
}

// declareExchange declares a non-durable exchange of kind named after t
// and deletes it at cleanup.
func (s *server) declareExchange(t testing.TB, ch *amqp.Channel, what, kind string) string {
	t.Helper()
	name := uniq(t, what)
	if err := ch.ExchangeDeclare(name, kind, false, false, false, false, nil); err != nil {
		t.Fatalf("declare %s exchange %s: %v", kind, what, err)
	}
	t.Cleanup(func() { s.tidy(func(ch *amqp.Channel) { _ = ch.ExchangeDelete(name, false, false) }) })
	return name
}

// tidy runs f on a fresh channel of a fresh connection, ignoring errors
// (cleanup of what a test declared on a long-lived server).
func (s *server) tidy(f func(ch *amqp.Channel)) {
	c, err := amqp.DialConfig(s.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return
	}
	f(ch)
}

// confirmed puts ch in confirm mode and returns a publish function that
// waits for each message's basic.ack and fails t on a nack.
func confirmed(t testing.TB, ch *amqp.Channel) func(exchange, key string, msg amqp.Publishing) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	return func(exchange, key string, msg amqp.Publishing) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
		if err != nil {
			t.Fatalf("publish to %q/%q: %v", exchange, key, err)
		}
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatalf("confirm of the publish to %q/%q: %v", exchange, key, err)
		}
		if !acked {
			t.Fatalf("the publish to %q/%q was nacked", exchange, key)
		}
	}
}

// text is a persistent-less plain message with body b.
func text(b string) amqp.Publishing {
	return amqp.Publishing{ContentType: "text/plain", Body: []byte(b)}
}

// drain takes every message from queue with basic.get (no-ack) until
// get-empty and returns their bodies in order.
func drain(t testing.TB, ch *amqp.Channel, queue string) []string {
	t.Helper()
	var out []string
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Body))
	}
}

// next waits up to 10 s for a delivery on ds.
func next(t testing.TB, ds <-chan amqp.Delivery, what string) amqp.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatalf("%s: the delivery channel closed", what)
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no delivery within 10 s", what)
	}
	return amqp.Delivery{}
}

// closeCode waits for the close of a channel or connection (errs from its
// NotifyClose) and returns the server's reply code.
func closeCode(t testing.TB, errs <-chan *amqp.Error, what string) int {
	t.Helper()
	select {
	case e, ok := <-errs:
		if !ok || e == nil {
			t.Fatalf("%s: closed without an error", what)
		}
		return e.Code
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not closed within 10 s", what)
	}
	return 0
}

// errCode is the AMQP reply code in err (0 if it has none).
func errCode(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
