package broker

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// The stalled consumer's pulls on topic S: stalledPulls woken before the
// clock starts and stalledLive during the round, each answered with
// stalledPullMax messages of stalledBody bytes (about 128 KiB). The
// batches of 2*stalledPullMax such messages that fill S stay within the
// test store's MaxMessageSize (256 KiB), which bounds a whole batch.
const (
	stalledPulls   = 200
	stalledLive    = 100
	stalledPullMax = 32
	stalledBody    = 4<<10 - 64
)

// stallRound is what one round of the stalled-consumer scenario measured:
// the wall time until the healthy consumers had every message, the CPU
// time (utime + stime) the whole process (broker and clients) spent
// meanwhile, and the median of the messages' delivery latency (from
// before the send to the pull's answer).
type stallRound struct {
	stalled   bool
	wall, cpu time.Duration
	p50       time.Duration
}

// stalledRun is one round of the stalled-consumer scenario, on a broker
// of its own that it closes before it returns: 4 producers send n
// messages to topic T (4 queues) while 4 healthy consumers long-poll them.
//
// With stall, a consumer that stopped reading holds 200 pulls on queue 0
// of topic S and 100 on queue 1. Before the clock starts, queue 0
// receives 64 messages of 4 KiB in one batch, which wakes the 200: their
// answers (128 KiB each, 25 MiB in all) are far more than its socket and
// write queue take. The clock starts once all of them were read from the
// store and handed to the connection. Then, as the round starts, a batch
// to queue 1 wakes the other 100 while the healthy consumers are being
// served: the hold service's workers answer them into the same full
// connection.
//
// Both kinds of round store the same messages (the two batches to S
// included) and start after a garbage collection, with every connection
// dialled: they differ only by the stalled consumer. mark, if not nil, is
// called with 0 just before the clock starts and with 1 once it stopped.
func stalledRun(tb testing.TB, stall bool, n int, mark func(at int)) stallRound {
	tb.Helper()
	b := testBroker(tb, tb.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	defer func() { _ = b.Close() }()
	var clients []*testClient
	client := func() *testClient {
		c := newTestClient(tb, b.Addr())
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			_ = c.c.Close()
		}
	}()
	prod := client()
	prod.mustSend("S", 0, "first", "")
	prod.mustSend("S", 1, "first", "")
	for q := range int32(4) {
		prod.mustSend("T", q, "first", "")
	}
	// One batch to S, so that every pull it wakes finds 32 messages
	// (128 KiB): the stalled consumer's answers are far more than the
	// socket buffers take.
	var batch []byte
	for range 2 * stalledPullMax {
		batch = record.AppendBatchItem(batch, 0, []byte(strings.Repeat("x", stalledBody)), "")
	}
	sendBatch := func(c *testClient, q int32) {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "S", DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, QueueID: q, Batch: true}
		if resp := c.invoke(protocol.SendBatchMessage, h.V2(), batch); resp.Code != protocol.Success {
			tb.Errorf("batch to S: %d %s", resp.Code, resp.Remark)
		}
	}
	stalledGot := func() int64 {
		s, _ := b.stats.Get(GroupGetNums, "S@stalled")
		return s.Total
	}
	if stall {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		defer nc.Close()
		writeStalledPulls(tb, nc, "stalled", 0, stalledPulls) // woken by the first batch
		writeStalledPulls(tb, nc, "stalled", 1, stalledLive)  // woken by the second
		testutil.WaitFor(tb, 10*time.Second, "the stalled consumer's pulls held", func() bool {
			return b.hold.Len() == stalledPulls+stalledLive
		})
	}
	sendBatch(prod, 0)
	if stall {
		testutil.WaitFor(tb, 10*time.Second, "the stalled consumer's woken pulls all answered (a hold worker waiting for its socket?)", func() bool {
			return b.hold.Len() == stalledLive && stalledGot() == stalledPulls*stalledPullMax
		})
	}
	cons := make([]*testClient, 4)
	prods := make([]*testClient, 4)
	for i := range 4 {
		cons[i], prods[i] = client(), client()
		for _, c := range []*testClient{cons[i], prods[i]} {
			ctx, cancel := contextTimeout(10 * time.Second)
			_, err := c.c.Conn(ctx, c.addr)
			cancel()
			if err != nil {
				tb.Fatal(err)
			}
		}
	}

	var got atomic.Int64
	all := make(chan struct{}) // closed when the healthy consumers have all n
	var wg sync.WaitGroup
	var latMu sync.Mutex
	var lat []time.Duration // of every message received
	runtime.GC()
	if mark != nil {
		mark(0)
	}
	cpu0, start := cpuTime(), time.Now()
	for q := range int32(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() {
				latMu.Lock()
				lat = append(lat, mine...)
				latMu.Unlock()
			}()
			off := int64(1)
			for {
				r := cons[q].pull("healthy", "T", q, off, (pullFlagSuspend | pullFlagSubscription), 20*time.Second, "*")
				if r.code == protocol.Success {
					off = r.hdr.NextBeginOffset
				}
				now := time.Now().UnixNano()
				for _, m := range r.msgs {
					if sent, err := strconv.ParseInt(string(m.Body), 10, 64); err == nil {
						mine = append(mine, time.Duration(now-sent))
					}
				}
				if k := int64(len(r.msgs)); k > 0 {
					if s := got.Add(k); s >= int64(n) {
						if s-k < int64(n) {
							close(all)
						}
						return
					}
				}
				select {
				case <-all:
					return
				default:
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sendBatch(prods[0], 1)
	}()
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += 4 {
				prods[p].mustSend("T", int32(i%4), strconv.FormatInt(time.Now().UnixNano(), 10), "")
			}
		}()
	}
	// At least 1,000 messages a second: healthy pulls are held for 20 s,
	// so one that a stalled consumer kept from being woken shows.
	timeout := time.NewTimer(10*time.Second + time.Duration(n)*time.Millisecond)
	defer timeout.Stop()
	select {
	case <-all:
	case <-timeout.C:
	}
	r := stallRound{stalled: stall, wall: time.Since(start), cpu: cpuTime() - cpu0}
	if mark != nil {
		mark(1)
	}
	// Wake the healthy consumers' last held pulls.
	for q := range int32(4) {
		prod.mustSend("T", q, "last", "")
	}
	if got.Load() < int64(n) {
		tb.Fatalf("healthy consumers received %d of %d messages in %v (stalled consumer: %v)", got.Load(), n, r.wall, stall)
	}
	wg.Wait()
	slices.Sort(lat)
	r.p50 = lat[len(lat)/2]
	if stall {
		// The pulls woken during the round were all answered too.
		testutil.WaitFor(tb, 10*time.Second, "the stalled consumer's pulls woken in the round all answered", func() bool {
			return b.hold.Len() == 0 && stalledGot() == (stalledPulls+stalledLive)*stalledPullMax
		})
	}
	return r
}

// writeStalledPulls writes n pulls of group for queue q of topic S from
// offset 1 on nc, held up to 30 s, each for up to stalledPullMax messages.
func writeStalledPulls(tb testing.TB, nc net.Conn, group string, q int32, n int) {
	tb.Helper()
	reqs := make([]*protocol.Command, n)
	for i := range reqs {
		h := &protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: "S", QueueID: q, QueueOffset: 1,
			MaxMsgNums: stalledPullMax, SysFlag: (pullFlagSuspend | pullFlagSubscription), SuspendTimeoutMillis: 30_000, Subscription: "*", ExpressionType: "TAG"}
		reqs[i] = protocol.NewRequest(protocol.PullMessage, h, nil)
		reqs[i].Opaque = stalledOpaque.Add(1)
	}
	writeFrames(tb, nc, reqs)
}

// writeFrames writes reqs on nc in one write, the way a client that
// pipelines its requests sends them.
func writeFrames(tb testing.TB, nc net.Conn, reqs []*protocol.Command) {
	tb.Helper()
	var frames []byte
	for _, req := range reqs {
		frame, err := protocol.EncodeFrame(req)
		if err != nil {
			tb.Fatal(err)
		}
		frames = append(frames, frame...)
	}
	if _, err := nc.Write(frames); err != nil {
		tb.Fatal(err)
	}
}

var stalledOpaque atomic.Int32

// TestBrokerStalledConsumerCostsOthersNothing: a consumer that stops
// reading while its held pulls are woken does not hold up the other
// consumers: they still receive every message at once (their pulls are
// held for 20 s, so any stall would show), and the broker keeps serving.
func TestBrokerStalledConsumerCostsOthersNothing(t *testing.T) {
	with := stalledRun(t, true, 400, nil)
	without := stalledRun(t, false, 400, nil)
	t.Logf("healthy consumers received 400 messages in %v with a stalled consumer, %v without", with.wall, without.wall)
}

// BenchmarkBrokerStalledConsumer measures what a stalled consumer costs
// the healthy ones, next to the noise of the machine measured in the same
// run, in two ways (n = max(b.N, 10000) messages a round, each round on
// fresh brokers, after one round to warm up):
//
//   - paired: two rounds run at once in the process, on two brokers, from
//     one start: 6 pairs with a stalled consumer on the first broker
//     alternate with 6 pairs with none. The load of the rest of the
//     machine falls on both halves of a pair alike, so their ratios are
//     steady. ratio: the healthy consumers' rate on the first broker over
//     the rate on the second, the median of the pairs with a stalled
//     consumer and its range; noise: the range of the same ratio in the
//     pairs without. p50-ratio and p50-noise: the same for the median
//     delivery latency, first broker over second (so above 1 is worse).
//     The rate follows the producers, who wait for each send; the latency
//     shows a stalled consumer holding up the others' pulls (a lock, a
//     worker, a queue they share). Neither shows CPU the stalled
//     consumer makes the broker burn: it slows both halves alike.
//   - cpu: rounds without (U) and with (S) a stalled consumer run one
//     after the other, U S U S ... U, 6 S rounds, each rated in messages
//     per CPU second of the process (broker and clients). Every S round
//     is divided by the mean of its two U neighbours (a steady drift
//     cancels out), every inner U round by its two U neighbours: ratio and
//     noise as above. It shows CPU the stalled consumer costs.
//
// The target is every ratio 1 within its noise.
func BenchmarkBrokerStalledConsumer(b *testing.B) {
	b.Run("paired", func(b *testing.B) {
		n := max(b.N, 10000)
		stalledPair(b, true, n) // warm-up, not counted
		// Per pair: the first half's rate and latency over the second's.
		var rate, p50 [2][]float64 // [0]: stalled/healthy, [1]: healthy/healthy
		var alone []float64
		var log strings.Builder
		for i := range 12 {
			r := stalledPair(b, i%2 == 0, n)
			k := i % 2
			rate[k] = append(rate[k], r[1].wall.Seconds()/r[0].wall.Seconds())
			p50[k] = append(p50[k], r[0].p50.Seconds()/r[1].p50.Seconds())
			alone = append(alone, float64(n)/r[1].wall.Seconds())
			fmt.Fprintf(&log, " %c%.0f/%.0f,%v/%v", "SU"[k], float64(n)/r[0].wall.Seconds(), float64(n)/r[1].wall.Seconds(),
				r[0].p50.Round(10*time.Microsecond), r[1].p50.Round(10*time.Microsecond))
		}
		b.Logf("pairs, msgs/s and median latency:%s", log.String())
		reportStallRatios(b, "", rate[0], rate[1])
		reportStallRatios(b, "p50-", p50[0], p50[1])
		b.ReportMetric(median(alone), "msgs/s-alone")
	})
	b.Run("cpu", func(b *testing.B) {
		const stalls = 6
		n := max(b.N, 10000)
		stalledRun(b, true, n, nil) // warm-up, not counted
		var rounds []stallRound
		var log strings.Builder
		for i := range 2*stalls + 1 {
			r := stalledRun(b, i%2 == 1, n, nil)
			rounds = append(rounds, r)
			fmt.Fprintf(&log, " %c%.0f", "US"[i%2], float64(n)/r.cpu.Seconds())
		}
		b.Logf("rounds, msgs/CPU-s:%s", log.String())
		rate := func(i int) float64 { return float64(n) / rounds[i].cpu.Seconds() }
		var ratios, noise, alone, stalled []float64
		for i := 1; i < len(rounds); i += 2 {
			ratios = append(ratios, rate(i)/((rate(i-1)+rate(i+1))/2))
			stalled = append(stalled, rate(i))
		}
		for i := 0; i < len(rounds); i += 2 {
			alone = append(alone, rate(i))
			if i >= 2 && i+2 < len(rounds) {
				noise = append(noise, rate(i)/((rate(i-2)+rate(i+2))/2))
			}
		}
		reportStallRatios(b, "", ratios, noise)
		b.ReportMetric(median(alone), "msgs/CPU-s-alone")
		b.ReportMetric(median(stalled), "msgs/CPU-s-stalled")
	})
}

// reportStallRatios reports the median and range of the stalled/healthy
// ratios and the range of the healthy/healthy ones (the noise), their
// names prefixed.
func reportStallRatios(b *testing.B, prefix string, ratios, noise []float64) {
	b.ReportMetric(median(ratios), prefix+"ratio")
	b.ReportMetric(ratios[0], prefix+"ratio-min")
	b.ReportMetric(ratios[len(ratios)-1], prefix+"ratio-max")
	slices.Sort(noise)
	b.ReportMetric(noise[0], prefix+"noise-min")
	b.ReportMetric(noise[len(noise)-1], prefix+"noise-max")
}

// median returns the median of xs (sorting it).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if k := len(xs); k%2 == 1 {
		return xs[k/2]
	} else {
		return (xs[k/2-1] + xs[k/2]) / 2
	}
}

// TestBrokerStalledMemberHoldsUpNoHeartbeat: a member of a consumer group
// that stopped reading, with its connection's write queue full of answers
// to its held pulls, does not hold up the broker's notices to the group.
// Consumers that join are answered at once, the other members are told at
// once, and the broker keeps serving heartbeats (served by two workers,
// which a notice waiting for the stalled socket would hold until
// WriteTimeout, 30 s, cut it off).
func TestBrokerStalledMemberHoldsUpNoHeartbeat(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")

	heartbeat := func(clientID string) *protocol.Command { return consumerHello(t, clientID, "G") }
	// A healthy member, told of every change of the group.
	notices := make(chan struct{}, 16)
	member := newTestClient(t, b.Addr())
	member.c.RegisterFunc(protocol.NotifyConsumerIDsChanged, func(*remotingConn, *protocol.Command) (*protocol.Command, error) {
		notices <- struct{}{}
		return nil, nil
	})
	if resp := member.invoke(protocol.HeartBeat, nil, heartbeat("member").Body); resp.Code != protocol.Success {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	notice := func(what string) {
		t.Helper()
		select {
		case <-notices:
		case <-time.After(5 * time.Second):
			t.Fatalf("the healthy member was not told within 5 s that %s", what)
		}
	}
	notice("it joined")

	// The stalled member joins, holds 200 pulls, and stops reading.
	stallPeer(t, b, prod, heartbeat("stalled"), "G", func() { notice("the stalled member joined") })

	// Three consumers join one after the other (more than the heartbeat
	// workers): each is answered, and the healthy member told, at once.
	for i := range 3 {
		c := newTestClient(t, b.Addr())
		ctx, cancel := contextTimeout(5 * time.Second)
		start := time.Now()
		resp, err := c.c.Invoke(ctx, c.addr, heartbeat(fmt.Sprint("joiner", i)))
		cancel()
		if err != nil {
			t.Fatalf("joiner %d: heartbeat not answered in %v: %v", i, time.Since(start), err)
		}
		if resp.Code != protocol.Success {
			t.Fatalf("joiner %d: heartbeat: %d %s", i, resp.Code, resp.Remark)
		}
		notice(fmt.Sprint("joiner ", i, " joined"))
	}
}

// stallPeer connects a peer that sends hello (a heartbeat), then holds
// 200 pulls of group on queue 0 of topic S (which must hold one message)
// and stops reading: one batch of 64 messages of 4 KiB wakes every pull,
// and their answers (25 MiB) fill its socket and write queue; four more
// pulls are answered at once. stallPeer returns once the broker has
// handed all of them to the connection and the connection refuses calls
// to the peer (remoting.Conn.NotReading); joined runs once hello is
// written.
func stallPeer(t *testing.T, b *Broker, prod *testClient, hello *protocol.Command, group string, joined func()) *remoting.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	frame, err := protocol.EncodeFrame(hello)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	joined()
	writeStalledPulls(t, nc, group, 0, stalledPulls)
	testutil.WaitFor(t, 10*time.Second, "the stalled peer's pulls held", func() bool { return b.hold.Len() == stalledPulls })
	var batch []byte
	for range 2 * stalledPullMax {
		batch = record.AppendBatchItem(batch, 0, []byte(strings.Repeat("x", stalledBody)), "")
	}
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "S", DefaultTopic: AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, QueueID: 0, Batch: true}
	if resp := prod.invoke(protocol.SendBatchMessage, h.V2(), batch); resp.Code != protocol.Success {
		t.Fatalf("batch to S: %d %s", resp.Code, resp.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "the stalled peer's pulls answered", func() bool {
		s, _ := b.stats.Get(GroupGetNums, "S@"+group)
		return b.hold.Len() == 0 && s.Total == stalledPulls*stalledPullMax
	})
	// Four more pulls, answered at once: whether or not the connection's
	// writer took the first answers in one write, 512 KiB more now wait
	// behind it, above MaxWriteQueue. A pull counts its messages before
	// its answer is queued, so the wait is for the queue itself.
	writeStalledPulls(t, nc, group, 0, 4)
	conn := serverConnOf(t, b, nc)
	testutil.WaitFor(t, 10*time.Second, "the stalled peer's last pulls answered and its connection not reading", func() bool {
		s, _ := b.stats.Get(GroupGetNums, "S@"+group)
		return s.Total == (stalledPulls+4)*stalledPullMax && conn.NotReading()
	})
	return conn
}

// serverConnOf is the broker's side of the connection nc.
func serverConnOf(t *testing.T, b *Broker, nc net.Conn) *remoting.Conn {
	t.Helper()
	for _, c := range b.srv.Conns() {
		if c.RemoteAddr().String() == nc.LocalAddr().String() {
			return c
		}
	}
	t.Fatalf("the broker holds no connection from %s", nc.LocalAddr())
	return nil
}

// TestBrokerStalledProducerHoldsUpNoCheckBack: a producer that stopped
// reading (its connection, shared with its consumer as the clients do,
// full of answers to held pulls) does not hold up the transaction
// check-backs to the producers of other groups.
func TestBrokerStalledProducerHoldsUpNoCheckBack(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	c := newTestClient(t, b.Addr())
	c.mustSend("S", 0, "first", "")
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: "stalled", ProducerDataSet: []*protocol.ProducerData{{GroupName: "spg"}}})
	if err != nil {
		t.Fatal(err)
	}
	stallPeer(t, b, c, protocol.NewRequest(protocol.HeartBeat, nil, body), "sg", func() {})
	testutil.WaitFor(t, 5*time.Second, "the stalled producer registered", func() bool { return len(b.producers.Clients("spg")) == 1 })

	// The stalled producer's half message is checked back first: its
	// check waits in (or, before, for) the stalled connection.
	c.sendHalf("TxS", 0, "stalled-half", "UNIQ-S", record.PropertyProducerGroup, "spg")
	testutil.WaitFor(t, 5*time.Second, "the stalled producer's half checked", func() bool { return b.Store().MaxOffset(TransHalfTopic, 0) >= 2 })

	// A healthy producer's half message is checked back and committed.
	newTxProducer(t, b.Addr(), "pg", func(string) int32 { return record.TxCommit })
	c.sendHalf("TxS", 0, "healthy-half", "UNIQ-H")
	testutil.WaitFor(t, 5*time.Second, "the healthy producer's half checked back and committed", func() bool {
		return b.Store().MaxOffset("TxS", 0) >= 1
	})
	r := c.pull("cg", "TxS", 0, 0, flagSubscription, 0, "*")
	if len(r.msgs) != 1 || string(r.msgs[0].Body) != "healthy-half" {
		t.Fatalf("TxS holds %d messages, want the healthy half committed", len(r.msgs))
	}
}

// stalledPair runs two rounds at once, each on a broker of its own, with
// one start and one stop (so neither half's set-up or clean-up runs in
// the other's time): the first round with a stalled consumer if stall,
// the second without.
func stalledPair(b *testing.B, stall bool, n int) [2]stallRound {
	var bars [2]sync.WaitGroup
	bars[0].Add(2)
	bars[1].Add(2)
	var rounds [2]stallRound
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := 0
			defer func() { // a round that failed lets the other one go on
				for ; next < 2; next++ {
					bars[next].Done()
				}
			}()
			rounds[i] = stalledRun(b, stall && i == 0, n, func(at int) {
				next = at + 1
				bars[at].Done()
				bars[at].Wait()
			})
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return rounds
}
