package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/smartgo/smartgo/internal/testutil"
)

// SmartGo's AMQP 0-9-1 next to RabbitMQ.
//
// TestAMQPNextToRabbitMQ runs `smartgo standalone` built from this tree
// and Debian's rabbitmq-server, each in its own process (startSmartgoAMQP,
// startRabbitMQ), and drives both with the same amqp091-go clients from
// this process, workload by workload (amqpWorkloads). A workload's
// messages go in slices taken in turn (slice i of both servers before
// slice i+1 of either, in sliceOrder's order), so that both meet the
// shared machine alike. The figures per workload and server: messages
// per second over the slices, and server CPU per message: the server
// process's CPU time (testutil.ProcessCPU: utime+stime, every thread's)
// over its slices only, divided by the messages published. Every slice
// checks that every message arrived at every queue it was routed to,
// once (amqpRig.run).
//
// It runs only with COMPARE_AMQP=<messages per workload and server>
// (`make compare-amqp`):
//
//	COMPARE_AMQP=200000 go test -run TestAMQPNextToRabbitMQ -v -timeout 30m .
//
// COMPARE_AMQP_ONLY=smartgo (or rabbitmq) runs one server;
// COMPARE_AMQP_WORKLOADS=persistent-128B,... the workloads named;
// COMPARE_AMQP_PPROF=1 serves SmartGo's /debug/pprof/ (its address in the
// log) for a profile during the run. Without rabbitmq-server installed,
// RabbitMQ's rows are skipped, and the log says so.
func TestAMQPNextToRabbitMQ(t *testing.T) {
	n, err := strconv.ParseInt(os.Getenv("COMPARE_AMQP"), 10, 64)
	if err != nil || n <= 0 {
		t.Skip("COMPARE_AMQP=<messages per workload> runs it (make compare-amqp)")
	}
	only := os.Getenv("COMPARE_AMQP_ONLY")
	var servers []*amqpServer
	if only == "" || only == "smartgo" {
		servers = append(servers, startSmartgoAMQP(t))
	}
	if only == "" || only == "rabbitmq" {
		if s := startRabbitMQ(t); s != nil {
			servers = append(servers, s)
		}
	}
	wls := amqpWorkloads
	if names := os.Getenv("COMPARE_AMQP_WORKLOADS"); names != "" {
		wls = nil
		for _, w := range amqpWorkloads {
			if strings.Contains(","+names+",", ","+w.name+",") {
				wls = append(wls, w)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tserver\tmsgs/s\tcpu µs/msg\tsmartgo÷rabbitmq (cpu)\t")
	for _, w := range wls {
		res := amqpWorkloadRun(t, w, servers, n)
		for _, s := range servers {
			r := res[s.name]
			ratio := ""
			if rr, ok := res["rabbitmq"]; ok && s.name == "smartgo" {
				ratio = fmt.Sprintf("%.2f", r.cpuPerMsg()/rr.cpuPerMsg())
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t\n", w.name, s.name, r.rate(), r.cpuPerMsg(), ratio)
		}
	}
	tw.Flush()
}

// amqpWorkload is one load of TestAMQPNextToRabbitMQ.
type amqpWorkload struct {
	name string
	size int // body bytes
	// durable: durable queues, persistent messages (delivery mode 2),
	// publisher confirms (window amqpWindow), consumers with manual acks
	// (one multiple ack per amqpAckEvery deliveries) and prefetch
	// amqpPrefetch. Otherwise: transient queues and messages, no
	// confirms, auto-ack consumers.
	durable bool
	queues  int // > 1: a fanout exchange bound to that many queues, a consumer on each
}

var amqpWorkloads = []amqpWorkload{
	{name: "persistent-128B", size: 128, durable: true, queues: 1},
	{name: "persistent-1KiB", size: 1024, durable: true, queues: 1},
	{name: "transient-128B", size: 128, queues: 1},
	{name: "fanout4-128B", size: 128, queues: 4},
}

const (
	amqpWindow   = 1000 // unconfirmed publishes in flight
	amqpPrefetch = 1000 // basic.qos of a manual-ack consumer
	amqpAckEvery = 100  // deliveries per multiple ack
	amqpSlices   = 5
	amqpSliceMin = 10 * amqpWindow
)

// amqpResult sums a server's slices of one workload.
type amqpResult struct {
	cpu, el time.Duration
	n       int64
}

func (r amqpResult) rate() float64 { return float64(r.n) / r.el.Seconds() }
func (r amqpResult) cpuPerMsg() float64 {
	return float64(r.cpu) / float64(time.Microsecond) / float64(r.n)
}

// amqpWorkloadRun drives every server with n messages of w (after a
// warm-up of its own), in slices taken in turn.
func amqpWorkloadRun(t *testing.T, w amqpWorkload, servers []*amqpServer, n int64) map[string]amqpResult {
	t.Helper()
	rigs := make([]*amqpRig, len(servers))
	for i, s := range servers {
		rigs[i] = newAMQPRig(t, s, w)
		defer rigs[i].close()
		if err := rigs[i].run(min(n/10, 5000)); err != nil {
			t.Fatalf("%s %s warm-up: %v", s.name, w.name, err)
		}
	}
	nSlices := int(max(min(int64(amqpSlices), n/amqpSliceMin), 1))
	res := map[string]amqpResult{}
	for i := range nSlices {
		count := n / int64(nSlices)
		if int64(i) < n%int64(nSlices) {
			count++
		}
		for _, j := range sliceOrder(len(servers), i) {
			s := servers[j]
			c0, err := testutil.ProcessCPU(s.pid)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := rigs[j].run(count); err != nil {
				t.Fatalf("%s %s: %v", s.name, w.name, err)
			}
			el := time.Since(start)
			c1, err := testutil.ProcessCPU(s.pid)
			if err != nil {
				t.Fatal(err)
			}
			r := res[s.name]
			r.cpu += c1.Since(c0)
			r.el += el
			r.n += count
			res[s.name] = r
		}
	}
	return res
}

// amqpRig is one workload's clients on one server: a publishing
// connection and channel, and a consuming connection with a channel and
// a consumer per queue.
type amqpRig struct {
	w          amqpWorkload
	pubConn    *amqp.Connection
	pub        *amqp.Channel
	confirms   chan amqp.Confirmation
	subConn    *amqp.Connection
	subs       []*amqp.Channel
	deliveries []<-chan amqp.Delivery
	exchange   string
	key        string
	seq        uint64 // the next message's sequence number (in its body)
}

func newAMQPRig(t *testing.T, s *amqpServer, w amqpWorkload) *amqpRig {
	t.Helper()
	r := &amqpRig{w: w}
	var err error
	fail := func(what string, err error) {
		r.close()
		t.Fatalf("%s %s: %s: %v", s.name, w.name, what, err)
	}
	if r.pubConn, err = amqp.Dial(s.url); err != nil {
		fail("dial", err)
	}
	if r.pub, err = r.pubConn.Channel(); err != nil {
		fail("channel", err)
	}
	if r.subConn, err = amqp.Dial(s.url); err != nil {
		fail("dial", err)
	}
	var names []string
	for q := range w.queues {
		names = append(names, fmt.Sprintf("compare-%s-%d", w.name, q))
	}
	if w.queues > 1 {
		r.exchange = "compare-" + w.name
		if err := r.pub.ExchangeDeclare(r.exchange, "fanout", w.durable, false, false, false, nil); err != nil {
			fail("exchange.declare", err)
		}
	} else {
		r.key = names[0]
	}
	for _, name := range names {
		if err := declareRetry(r.pubConn, name, w.durable); err != nil {
			fail("queue.declare", err)
		}
		if r.exchange != "" {
			if err := r.pub.QueueBind(name, "", r.exchange, false, nil); err != nil {
				fail("queue.bind", err)
			}
		}
	}
	if w.durable {
		if err := r.pub.Confirm(false); err != nil {
			fail("confirm.select", err)
		}
		r.confirms = r.pub.NotifyPublish(make(chan amqp.Confirmation, amqpWindow+1))
	}
	for _, name := range names {
		ch, err := r.subConn.Channel()
		if err != nil {
			fail("channel", err)
		}
		r.subs = append(r.subs, ch)
		if w.durable {
			if err := ch.Qos(amqpPrefetch, 0, false); err != nil {
				fail("basic.qos", err)
			}
		}
		d, err := ch.Consume(name, "", !w.durable, false, false, false, nil)
		if err != nil {
			fail("basic.consume", err)
		}
		r.deliveries = append(r.deliveries, d)
	}
	return r
}

// declareRetry declares a queue, again for up to 30 s while the server
// refuses it (SmartGo's durable queues need its broker, which may still
// be registering when AMQP is served). A refusal closes the channel, so
// each try opens a channel of its own.
func declareRetry(c *amqp.Connection, name string, durable bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		_, err = ch.QueueDeclare(name, durable, false, false, false, nil)
		ch.Close()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run publishes count messages and waits until every queue's consumer
// has received each of them, once.
func (r *amqpRig) run(count int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first := r.seq
	r.seq += uint64(count)
	var wg sync.WaitGroup
	errs := make([]error, len(r.deliveries))
	for i, d := range r.deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.consume(ctx, d, first, count)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	perr := r.publish(ctx, first, count)
	if perr != nil {
		cancel()
	}
	wg.Wait()
	if perr != nil {
		return fmt.Errorf("publish: %w", perr)
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("queue %d: %w", i, err)
		}
	}
	return nil
}

func (r *amqpRig) publish(ctx context.Context, first uint64, count int64) error {
	body := make([]byte, r.w.size)
	for i := 8; i < len(body); i++ {
		body[i] = byte('a' + i%26)
	}
	msg := amqp.Publishing{Body: body}
	if r.w.durable {
		msg.DeliveryMode = amqp.Persistent
	}
	inflight := 0
	await := func() error {
		select {
		case c, ok := <-r.confirms:
			if !ok {
				return fmt.Errorf("channel closed with %d unconfirmed", inflight)
			}
			if !c.Ack {
				return fmt.Errorf("publish %d nacked", c.DeliveryTag)
			}
			inflight--
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%d unconfirmed: %w", inflight, ctx.Err())
		}
	}
	for i := range uint64(count) {
		if r.confirms != nil && inflight == amqpWindow {
			if err := await(); err != nil {
				return err
			}
		}
		binary.BigEndian.PutUint64(body, first+i)
		if err := r.pub.PublishWithContext(ctx, r.exchange, r.key, false, false, msg); err != nil {
			return err
		}
		inflight++
	}
	for r.confirms != nil && inflight > 0 {
		if err := await(); err != nil {
			return err
		}
	}
	return nil
}

// consume takes count deliveries from d, which must be the messages
// first..first+count-1, each once (in any order), acknowledging them
// (manual acks) every amqpAckEvery deliveries and at the last.
func (r *amqpRig) consume(ctx context.Context, d <-chan amqp.Delivery, first uint64, count int64) error {
	seen := make([]bool, count)
	for got := int64(0); got < count; {
		select {
		case m, ok := <-d:
			if !ok {
				return fmt.Errorf("consumer closed after %d of %d messages", got, count)
			}
			if len(m.Body) != r.w.size {
				return fmt.Errorf("a body of %d bytes, want %d", len(m.Body), r.w.size)
			}
			i := binary.BigEndian.Uint64(m.Body) - first
			if i >= uint64(count) {
				return fmt.Errorf("message %d outside this slice's %d..%d", i+first, first, first+uint64(count)-1)
			}
			if seen[i] {
				return fmt.Errorf("message %d delivered twice", i+first)
			}
			seen[i] = true
			got++
			if r.w.durable && (got%amqpAckEvery == 0 || got == count) {
				if err := m.Ack(true); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return fmt.Errorf("%d of %d messages arrived: %w", got, count, ctx.Err())
		}
	}
	return nil
}

func (r *amqpRig) close() {
	if r.subConn != nil {
		r.subConn.Close()
	}
	if r.pubConn != nil {
		r.pubConn.Close()
	}
}
