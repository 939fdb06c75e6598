package amqp091

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testutil"
)

// dataServer starts a standalone with its data in dir/data and its logs
// in a directory of their own (extra: more -set flags), stopped at t's
// cleanup; it skips with SMARTGO_AMQP_URL set.
func dataServer(t *testing.T, dir string, extra ...string) *server {
	t.Helper()
	if externalURL != "" {
		t.Skip("starts its own smartgo standalone; SMARTGO_AMQP_URL is set")
	}
	s := newStandalone(t, t.TempDir(), extra...)
	if s.args[1] != "-data" {
		t.Fatalf("standalone arguments %q do not start with -data", s.args)
	}
	s.args[2] = filepath.Join(dir, "data")
	t.Cleanup(func() {
		if s.cmd != nil && s.cmd.ProcessState == nil {
			select {
			case <-s.exited:
			default:
				if err := s.stop(); err != nil {
					t.Error(err)
				}
			}
		}
		if t.Failed() {
			t.Logf("smartgo log (%s):\n%s", s.log, tail(readFile(s.log), 8000))
		}
	})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return &server{url: s.url("guest", "guest"), proc: s}
}

// TestFaultDiskFull: amqp091-go publishers in confirm mode (window 500)
// into a durable queue of a standalone whose data is on a 96 MiB tmpfs;
// another process fills the tmpfs. From then on no publish may be
// confirmed with basic.ack unless the broker stored it: the publishes
// are nacked (or the channel closed), and a durable queue.declare gets a
// channel error, not a hang. A connection that publishes then is told
// connection.blocked ("low on disk", as RabbitMQ's disk alarm) and its
// publish waits; once the filler is removed it is told
// connection.unblocked and the publish is confirmed, and publishing is
// confirmed again; after a SIGKILL and a restart (so that what is read
// back comes from the store, not the engine's memory) every message
// confirmed before, during and after the full disk is in the queue.
func TestFaultDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and fills it")
	}
	disk := testutil.MountTmpfs(t, "96m")
	s := dataServer(t, disk, "store.segment_size=8MiB", "store.preallocate=1MiB")
	q := uniq(t, "q")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p1 := startFaultPublisher(t, s.url, "", q, "before")
	testutil.WaitFor(t, 60*time.Second, "300 confirms", func() bool { a, _ := p1.counts(); return a >= 300 })

	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	a0, _ := p1.counts()
	// The publisher either gets nacks or its channel closes; either way
	// the confirms stop.
	testutil.WaitFor(t, 60*time.Second, "publishes refused on the full disk", func() bool {
		_, n := p1.counts()
		p1.mu.Lock()
		ended := p1.err != nil
		p1.mu.Unlock()
		return n >= 20 || ended
	})
	aFull, nFull := p1.counts()
	t.Logf("disk filled after %d confirms; %d more confirmed until refusals, %d nacked", a0, aFull-a0, nFull)
	if !s.proc.logHas("disk full, refusing writes") {
		t.Fatal("the broker does not say its disk is full")
	}

	// A definitions change on the full disk: a clear error, soon.
	ch = channel(t, conn)
	start := time.Now()
	_, err := ch.QueueDeclare(uniq(t, "onfull"), true, false, false, false, nil)
	took := time.Since(start)
	t.Logf("durable queue.declare on the full disk: %v after %v", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("a durable queue.declare on the full disk succeeded")
	}
	if errCode(err) != amqp.InternalError {
		t.Fatalf("durable queue.declare on the full disk: %v, want a 541 channel error", err)
	}
	if took > 40*time.Second {
		t.Fatalf("durable queue.declare on the full disk took %v", took)
	}
	// A durable exchange: only the definitions snapshot changes.
	ch = channel(t, conn)
	start = time.Now()
	err = ch.ExchangeDeclare(uniq(t, "xfull"), "direct", true, false, false, false, nil)
	took = time.Since(start)
	t.Logf("durable exchange.declare on the full disk: %v after %v", err, took.Round(time.Millisecond))
	if errCode(err) != amqp.InternalError || took > 40*time.Second {
		t.Fatalf("durable exchange.declare on the full disk: %v after %v, want a 541 channel error", err, took)
	}

	// A connection that publishes now is blocked: told so with
	// connection.blocked, its publish waits (neither acked nor nacked).
	bconn := s.dial(t)
	blocked := bconn.NotifyBlocked(make(chan amqp.Blocking, 4))
	bch := channel(t, bconn)
	if err := bch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	bconf, err := bch.PublishWithDeferredConfirm("", q, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("blocked-publish")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-blocked:
		if !b.Active || b.Reason != "low on disk" {
			t.Fatalf("connection.blocked: %+v, want active with reason \"low on disk\"", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no connection.blocked for a publisher on the full disk")
	}
	select {
	case <-bconf.Done():
		t.Fatalf("a publish on a blocked connection was confirmed (ack %v) on the full disk", bconf.Acked())
	default:
	}

	removeAndWait(t, s, filler)
	select {
	case b := <-blocked:
		if b.Active {
			t.Fatalf("after space freed: %+v, want connection.unblocked", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no connection.unblocked once space freed")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	acked, err := bconf.WaitContext(cctx)
	ccancel()
	if err != nil || !acked {
		t.Fatalf("the blocked publish once unblocked: acked %v, %v; want acked", acked, err)
	}
	p1.stop() // its blocked publishes are confirmed now
	p2 := startFaultPublisher(t, s.url, "", q, "after")
	testutil.WaitFor(t, 60*time.Second, "100 confirms after space freed", func() bool { a, _ := p2.counts(); return a >= 100 })
	p2.stop()
	_, n2 := p2.counts()
	if n2 > 0 {
		t.Errorf("%d publishes nacked after space freed", n2)
	}
	// A definitions change works again.
	ch = channel(t, conn)
	if _, err := ch.QueueDeclare(uniq(t, "afterfull"), true, false, false, false, nil); err != nil {
		t.Fatalf("durable queue.declare after space freed: %v", err)
	}
	_ = conn.Close()

	s.proc.kill9()
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	got := consumeAllAck(t, s, q)
	var lost []string
	if got["blocked-publish"] == 0 {
		lost = append(lost, "blocked-publish")
	}
	confirmedN := 0
	for _, p := range []*faultPublisher{p1, p2} {
		p.mu.Lock()
		for _, b := range p.acked {
			confirmedN++
			if got[b] == 0 {
				lost = append(lost, b)
			}
		}
		p.mu.Unlock()
	}
	a2, _ := p2.counts()
	t.Logf("confirmed %d before the refusals, %d after space freed; %d messages in the queue after SIGKILL and restart", aFull, a2, len(got))
	if len(lost) > 0 {
		t.Fatalf("%d confirmed messages lost (e.g. %q)", len(lost), first(lost))
	}
}

// removeAndWait removes the filler and waits until the broker says it
// takes writes again.
func removeAndWait(t *testing.T, s *server, filler string) {
	t.Helper()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "writes accepted again", func() bool { return s.proc.logHas("disk has room again") })
}

// logHas reports whether the current run's log holds text.
func (s *standalone) logHas(text string) bool { return fileContains(s.log, text) }

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// TestFaultDiskFullKill9: confirm-mode publishers into a durable queue
// of a standalone on a tmpfs that another process fills; the standalone
// is killed with SIGKILL while the disk is full and started again on it
// (its store cannot index the last records yet), then the filler is
// removed and a new message published. Every confirmed message must be
// in the queue, then and after a second restart. The queue used to
// load only the indexed ones and, once the new message was stored past
// the others, commit over them: confirmed messages never delivered. Then
// it read them in only once a new message was stored past them, after
// that message's confirm (a consumer right after it missed 701 of 3840
// confirmed messages, under load). Now AMQP waits to load the queue
// until the broker indexed every message it stored.
func TestFaultDiskFullKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs, fills it and kills a process")
	}
	disk := testutil.MountTmpfs(t, "96m")
	s := dataServer(t, disk, "store.segment_size=8MiB", "store.preallocate=1MiB")
	q := uniq(t, "q")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	// A restart with the queue declared: its recovery reads the queue.
	if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	p := startFaultPublisher(t, s.url, "", q, "load")
	testutil.WaitFor(t, 60*time.Second, "300 confirms", func() bool { a, _ := p.counts(); return a >= 300 })
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	testutil.WaitFor(t, 60*time.Second, "publishes refused on the full disk", func() bool { _, n := p.counts(); return n >= 20 })
	s.proc.kill9()
	p.stop()

	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got := consumeAll(t, s, q, false)
		have := map[string]bool{}
		for _, b := range got {
			have[b] = true
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		var lost []string
		for _, b := range p.acked {
			if !have[b] {
				lost = append(lost, b)
			}
		}
		t.Logf("%s: %d confirmed, %d nacked, %d in the queue", when, len(p.acked), len(p.nacked), len(got))
		if len(lost) > 0 {
			t.Fatalf("%s: %d confirmed messages lost (e.g. %q)", when, len(lost), first(lost))
		}
	}
	// Space freed: a new message is confirmed, then every confirmed one
	// is in the queue (the last ones before the kill were not readable
	// when the queue loaded: the broker indexes them once space frees),
	// and again after a second restart.
	testutil.WaitFor(t, 60*time.Second, "writes accepted again", func() bool { return s.proc.logHas("disk has room again") })
	// AMQP waits until the broker indexed every message it stored (the
	// queue must not load without them) and retries its start with a
	// back-off of up to 30 s.
	testutil.WaitFor(t, 90*time.Second, "AMQP to serve", func() bool { return s.proc.logHas("AMQP 0-9-1 listening") })
	conn = s.dial(t)
	ch = channel(t, conn)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nacks := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprintf("after-%d", nacks))})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		acked, err := dc.WaitContext(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if acked {
			break
		}
		nacks++
		if time.Since(start) > 90*time.Second {
			t.Fatalf("publishes still nacked %v after the disk had room again (%d nacks)", time.Since(start), nacks)
		}
		time.Sleep(100 * time.Millisecond) // retry pacing, as a publisher would
	}
	t.Logf("the first publish acked %v after the broker took writes again (%d nacked before)", time.Since(start).Round(time.Millisecond), nacks)
	_ = conn.Close()
	if s.proc.logHas("holds messages the queue did not load") {
		// The queue reads them in the background: the new message's
		// confirm does not wait for that.
		testutil.WaitFor(t, 30*time.Second, "the queue to read the messages it had not loaded",
			func() bool { return s.proc.logHas("did not load are ready again") })
	}
	check("once space freed and a new message was stored")
	t.Logf("the queue read messages it had not loaded: %v", s.proc.logHas("did not load are ready again"))
	s.proc.kill9()
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	check("after a second restart")
}

// TestFaultRestartOnFullDiskAMQPWaits: a standalone whose disk is full
// when it starts cannot load its AMQP definitions (the brokers refuse the
// writes that reading them takes). It starts anyway, with AMQP waiting
// and retrying, and serves AMQP once space frees: the message confirmed
// before the kill is there. (The whole process used to exit: "bridge
// failed to start".)
func TestFaultRestartOnFullDiskAMQPWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs, fills it and kills a process")
	}
	disk := testutil.MountTmpfs(t, "96m")
	s := dataServer(t, disk, "store.segment_size=8MiB", "store.preallocate=1MiB")
	q := uniq(t, "q")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("before the full disk")})
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := dc.WaitContext(ctx); err != nil || !acked {
		t.Fatalf("publish before the full disk: acked %v, err %v", acked, err)
	}
	_ = conn.Close()
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	s.proc.kill9()

	if err := s.proc.start(); err != nil {
		t.Fatalf("the standalone did not start on a full disk: %v", err)
	}
	testutil.WaitFor(t, 60*time.Second, "AMQP to say it waits", func() bool { return s.proc.logHas("AMQP 0-9-1 waits") })
	if s.proc.logHas("AMQP 0-9-1 listening") {
		t.Fatal("AMQP says it listens with its definitions not loaded")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 90*time.Second, "AMQP to serve once space freed", func() bool { return s.proc.logHas("AMQP 0-9-1 listening") })
	got := consumeAll(t, s, q, true)
	if len(got) != 1 || got[0] != "before the full disk" {
		t.Fatalf("queue after the restart on a full disk holds %q, want the confirmed message", got)
	}
}
