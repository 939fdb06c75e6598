package amqp091

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestFaultDamagedRecord: 200 confirmed messages in a durable queue; the
// standalone stopped; the bodies of two of them damaged in the broker's
// commitlog (one in the middle, the last one: bytes a bad disk changed);
// the standalone started again on its data. It must serve the queue's
// 198 other messages, each once and in order, report the damage in its
// log, and go on taking messages.
func TestFaultDamagedRecord(t *testing.T) {
	for _, stop := range []string{"clean", "kill9"} {
		t.Run(stop, func(t *testing.T) { testDamagedRecord(t, stop == "kill9") })
	}
}

func testDamagedRecord(t *testing.T, kill bool) {
	s := ownServer(t)
	q := uniq(t, "q")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, ch)
	const n = 200
	var all []string
	for i := range n {
		body := fmt.Sprintf("dmg-%04d-%s", i, strings.Repeat("x", 100))
		all = append(all, body)
		publish("", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
	}
	_ = conn.Close()
	if kill {
		s.proc.kill9()
	} else if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}

	seg := filepath.Join(s.proc.dir, "data", "store", "commitlog", fmt.Sprintf("%020d", 0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	damaged := map[string]bool{}
	for _, i := range []int{100, n - 1} {
		at := bytes.Index(data, []byte(all[i]))
		if at < 0 || bytes.Count(data, []byte(all[i])) != 1 {
			t.Fatalf("%s is not in the commitlog exactly once", all[i][:8])
		}
		data[at+20] ^= 0xff // in the body's x's
		damaged[all[i]] = true
	}
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	got := consumeAllOrdered(t, s, q)
	var want []string
	for _, b := range all {
		if !damaged[b] {
			want = append(want, b)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the damage: %d messages (%s ... %s), want the %d undamaged ones in order",
			len(got), short(got, 0), short(got, len(got)-1), len(want))
	}
	reported := s.proc.damageReports()
	if len(reported) == 0 {
		t.Error("the damage is not reported in the log")
	}
	t.Logf("%d messages served after the damage; reported: %q", len(got), reported)
	// The queue goes on.
	conn = s.dial(t)
	ch = channel(t, conn)
	publish = confirmed(t, ch)
	publish("", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("after")})
	if after := drain(t, ch, q); len(after) != 1 || after[0] != "after" {
		t.Fatalf("after the damage, a new message: %q", after)
	}
}

func short(s []string, i int) string {
	if i < 0 || i >= len(s) {
		return "-"
	}
	return s[i][:min(8, len(s[i]))]
}

// consumeAllOrdered takes every message in queue (the count its passive
// declare answers) with a consumer that acks them, in delivery order.
func consumeAllOrdered(t *testing.T, s *server, queue string) []string {
	t.Helper()
	return receiveAll(t, s, queue, "message of "+queue, func(d amqp.Delivery) {
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFaultDamagedDefinitions: the newest snapshot of the durable
// definitions (AMQP_DEFINITIONS) damaged in the broker's commitlog, with
// messages stored after it. The standalone must still start and serve
// AMQP: the definitions come from the snapshot before it (the last
// change is lost, and the log says so), and the durable queue those
// hold has every confirmed message.
func TestFaultDamagedDefinitions(t *testing.T) {
	for _, stop := range []string{"clean", "kill9"} {
		t.Run(stop, func(t *testing.T) { testDamagedDefinitions(t, stop == "kill9") })
	}
}

func testDamagedDefinitions(t *testing.T, kill bool) {
	s := ownServer(t)
	x, q, q2 := uniq(t, "x"), uniq(t, "q"), uniq(t, "lastchange")
	conn := s.dial(t)
	ch := channel(t, conn)
	if err := ch.ExchangeDeclare(x, "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q, "k", x, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q2, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Messages stored after the newest snapshot: it is not the log's
	// tail, which a restart would cut as torn.
	publish := confirmed(t, ch)
	var all []string
	for i := range 20 {
		body := fmt.Sprintf("defs-%02d", i)
		all = append(all, body)
		publish(x, "k", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
	}
	_ = conn.Close()
	if kill {
		s.proc.kill9()
	} else if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}

	seg := filepath.Join(s.proc.dir, "data", "store", "commitlog", fmt.Sprintf("%020d", 0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(data, []byte(q2)) // in the newest snapshot only
	if at < 0 {
		t.Fatal("the newest snapshot is not in the commitlog")
	}
	data[at+2] ^= 0xff
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	if got := consumeAllOrdered(t, s, q); !slices.Equal(got, all) {
		t.Fatalf("after the damaged snapshot, queue %s holds %q, want %q", q, got, all)
	}
	conn = s.dial(t)
	ch = channel(t, conn)
	publish = confirmed(t, ch)
	publish(x, "k", amqp.Publishing{Body: []byte("after")})
	if got := drain(t, ch, q); len(got) != 1 || got[0] != "after" {
		t.Fatalf("the binding after the damaged snapshot: %q", got)
	}
	reported := s.proc.damageReports()
	if len(reported) == 0 {
		t.Error("the damage is not reported in the log")
	}
	// After a clean stop the broker still indexes the damaged snapshot
	// (after a kill its recovery drops it): the backend passes it over.
	if !kill && !s.proc.logHas("AMQP definitions snapshot cannot be read") {
		t.Error("the backend does not say it passed over the damaged snapshot")
	}
	t.Logf("reported: %q", reported)
}

// damageReports returns the ERROR lines of the current run's log that
// report damaged data.
func (s *standalone) damageReports() []string {
	var out []string
	for _, l := range strings.Split(readFile(s.log), "\n") {
		if strings.Contains(l, "level=ERROR") && (strings.Contains(l, "verification") || strings.Contains(l, "corrupt") ||
			strings.Contains(l, "cannot be read")) {
			out = append(out, l)
		}
	}
	return out
}
