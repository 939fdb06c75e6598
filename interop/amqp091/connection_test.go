package amqp091

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testnet"
)

// TestHeartbeats: a 1 s heartbeat asked for by the client is what the
// connection runs with, and a connection idle for 5 s stays open (the
// client gives up after 3 s without a frame from the server, the server
// after 2 s without one from the client), and still works.
func TestHeartbeats(t *testing.T) {
	s := sharedServer(t)
	conn := s.dialConfig(t, amqp.Config{Heartbeat: time.Second})
	if conn.Config.Heartbeat != time.Second {
		t.Fatalf("negotiated heartbeat %v, want 1s", conn.Config.Heartbeat)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	select {
	case err := <-closed:
		t.Fatalf("the idle connection closed: %v", err)
	case <-time.After(5 * time.Second): // the idle time is what is tested
	}
	ch := channel(t, conn)
	q := s.declareQueue(t, ch, "alive", false, nil)
	confirmed(t, ch)("", q, text("alive"))
	if got := drain(t, ch, q); !slices.Equal(got, []string{"alive"}) {
		t.Fatalf("after 5 s idle: %q", got)
	}
}

// TestServerCapabilities: connection.start announces the RabbitMQ
// extensions the clients rely on (amqp091-go reads them into
// Connection.Properties).
func TestServerCapabilities(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	caps, ok := conn.Properties["capabilities"].(amqp.Table)
	if !ok {
		t.Fatalf("server-properties without a capabilities table: %v", conn.Properties)
	}
	for _, c := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify"} {
		if caps[c] != true {
			t.Errorf("capability %s = %v, want true (all: %v)", c, caps[c], caps)
		}
	}
	if _, ok := conn.Properties["product"].(string); !ok {
		t.Errorf("server-properties without a product: %v", conn.Properties)
	}
}

// TestUnknownVhost: connection.open of a virtual host the server does not
// have is refused with 530 NOT_ALLOWED.
func TestUnknownVhost(t *testing.T) {
	s := sharedServer(t)
	_, err := amqp.DialConfig(s.url, amqp.Config{Vhost: "no-such-vhost-" + uniq(t, "v"), Dial: amqp.DefaultDial(10 * time.Second)})
	if errCode(err) != amqp.NotAllowed {
		t.Fatalf("open of an unknown vhost: %v, want 530 NOT_ALLOWED", err)
	}
}

// TestWrongPassword: against a server with users (a `smartgo passwd`
// file for a standalone; guest on RabbitMQ), a wrong password is refused
// (403 ACCESS_REFUSED, or amqp091-go's ErrCredentials when the server
// just closes), an unknown user too, and the right one gets in.
func TestWrongPassword(t *testing.T) {
	user, pass := "guest", "guest"
	var s *server
	if externalURL != "" {
		s = sharedServer(t)
		u, err := url.Parse(s.url)
		if err != nil {
			t.Fatal(err)
		}
		user = u.User.Username()
		pass, _ = u.User.Password()
	} else {
		user, pass = "sensor-17", "s3cret-Pass"
		file := filepath.Join(t.TempDir(), "amqp.passwd")
		bin := sharedBinary(t)
		cmd := exec.Command(bin, "passwd", "-f", file, "-u", user, "-p", pass)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("smartgo passwd: %v\n%s", err, out)
		}
		s = ownServer(t, "amqp.credentials_file="+file)
	}
	withUser := func(u, p string) string {
		parsed, err := url.Parse(s.url)
		if err != nil {
			t.Fatal(err)
		}
		parsed.User = url.UserPassword(u, p)
		return parsed.String()
	}
	for _, c := range []struct{ what, user, pass string }{
		{"a wrong password", user, pass + "x"},
		{"an unknown user", "nobody-" + uniq(t, "u"), pass},
	} {
		_, err := amqp.DialConfig(withUser(c.user, c.pass), amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
		if !errors.Is(err, amqp.ErrCredentials) && errCode(err) != amqp.AccessRefused {
			t.Errorf("login with %s: %v, want 403 ACCESS_REFUSED", c.what, err)
		}
	}
	conn, err := amqp.DialConfig(withUser(user, pass), amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("login with the right password: %v", err)
	}
	_ = conn.Close()
}

// sharedBinary is the smartgo binary the standalones run: cmd/smartgo of
// this checkout, built once per test binary, or SMARTGO_AMQP_BIN (a
// prebuilt one, e.g. of another branch).
func sharedBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("SMARTGO_AMQP_BIN"); bin != "" {
		return bin
	}
	return testnet.SmartgoBinary(t, filepath.Join("..", ".."))
}

// TestDurableQueueSurvivesKill (standalone only): what SmartGo promises
// for a durable queue across a crash. It asserts
//   - every persistent message confirmed before a SIGKILL is there after
//     the restart, in order;
//   - after a SIGKILL, the messages delivered but not acked come back
//     (redelivered), and the acked ones may come back too (at-least-once:
//     acks are committed in the background) but only as a prefix before
//     the unacked ones, never out of order;
//   - after a clean stop (SIGINT), acked messages do not come back and
//     the unacked ones do.
func TestDurableQueueSurvivesKill(t *testing.T) {
	s := ownServer(t)
	qName := uniq(t, "durable")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(qName, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, ch)
	const n = 20
	var all []string
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf("m%02d", i)
		all = append(all, body)
		publish("", qName, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
	}
	_ = conn.Close()

	s.proc.kill9()
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	// Every confirmed message survived the kill, in order. Take 5 and ack
	// them, take the other 15 without acking.
	conn = s.dial(t)
	ch = channel(t, conn)
	if q, err := ch.QueueDeclarePassive(qName, true, false, false, false, nil); err != nil || q.Messages != n {
		t.Fatalf("after SIGKILL: declare-ok %+v, %v; want %d messages", q, err, n)
	}
	ds, err := ch.Consume(qName, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		d := next(t, ds, fmt.Sprint("message ", i))
		if string(d.Body) != all[i-1] {
			t.Fatalf("after SIGKILL, message %d is %q, want %s", i, d.Body, all[i-1])
		}
		if i <= 5 {
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Close the channel: its close-ok comes after the acks were taken.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	s.proc.kill9()
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, s, qName, true)
	// At least the 15 unacked ones, and at most all 20, as a suffix.
	if len(got) < n-5 || !slices.Equal(got, all[n-len(got):]) {
		t.Fatalf("after the second SIGKILL: %q; want a suffix of the 20 holding at least m06..m20", got)
	}
	t.Logf("after SIGKILL, %d acked messages came back (at-least-once)", len(got)-(n-5))

	// Ack the first three of what is there; stop cleanly; the rest is
	// exactly what comes back.
	conn = s.dial(t)
	ch = channel(t, conn)
	ds, err = ch.Consume(qName, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		d := next(t, ds, "before the clean stop")
		if string(d.Body) != got[i] {
			t.Fatalf("before the clean stop, message %d is %q, want %s", i, d.Body, got[i])
		}
		if i < 3 {
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	if after := consumeAll(t, s, qName, true); !slices.Equal(after, got[3:]) {
		t.Fatalf("after a clean stop: %q, want %q (acked ones gone, unacked back)", after, got[3:])
	}
}

// consumeAll returns the bodies of every message in queue (the count its
// passive declare answers), taken by a consumer without acking them (the
// connection closes at the end, so they stay); with redelivered, each
// must be flagged Redelivered.
func consumeAll(t *testing.T, s *server, queue string, redelivered bool) []string {
	t.Helper()
	return receiveAll(t, s, queue, "recovered message", func(d amqp.Delivery) {
		if redelivered && !d.Redelivered {
			t.Errorf("%q was delivered before but has no Redelivered flag", d.Body)
		}
	})
}

// receiveAll consumes as many messages of queue as its passive declare
// counts, in delivery order, calls each on every delivery (what names
// them when one is missing), and returns their bodies.
func receiveAll(t *testing.T, s *server, queue, what string, each func(amqp.Delivery)) []string {
	t.Helper()
	conn := s.dial(t)
	defer conn.Close()
	ch := channel(t, conn)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range q.Messages {
		d := next(t, ds, what)
		each(d)
		out = append(out, string(d.Body))
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVirtualHostsIsolated (standalone only: RabbitMQ needs its vhosts
// created first): with amqp.vhosts listing two virtual hosts, each opens,
// and a queue declared in one does not exist in the other.
func TestVirtualHostsIsolated(t *testing.T) {
	s := ownServer(t, "amqp.vhosts=/,tenant-a")
	root := channel(t, s.dialConfig(t, amqp.Config{Vhost: "/"}))
	tenant := channel(t, s.dialConfig(t, amqp.Config{Vhost: "tenant-a"}))
	q := uniq(t, "q")
	if _, err := tenant.QueueDeclare(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	confirmed(t, tenant)("", q, text("in tenant-a"))
	if got := drain(t, tenant, q); !slices.Equal(got, []string{"in tenant-a"}) {
		t.Fatalf("tenant-a's queue: %q", got)
	}
	_, err := root.QueueDeclarePassive(q, false, false, false, false, nil)
	if errCode(err) != amqp.NotFound {
		t.Fatalf("tenant-a's queue seen from /: %v, want 404", err)
	}
	_, err = amqp.DialConfig(s.url, amqp.Config{Vhost: "tenant-b", Dial: amqp.DefaultDial(10 * time.Second)})
	if errCode(err) != amqp.NotAllowed {
		t.Fatalf("open of an unlisted vhost: %v, want 530", err)
	}
}
