package broker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Sends counted a written-behind round at a time (sendTally): from
// several connections at once, with requests in flight on each and two
// topics in turn, every answered send is already in its topic's put count
// and in the runtime put times when its answer arrives, and in the end
// each topic's count and size and the put times hold every send once,
// and every send was counted out of the sends in flight once.
func TestBrokerSendCountedBeforeAnswer(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	topics := []string{"TallyA", "TallyB"}
	const conns, per, window = 4, 300, 16
	var (
		answered [2]atomic.Int64
		all      atomic.Int64
		sizes    [2]atomic.Int64
		mu       sync.Mutex
		bad      []string
	)
	fail := func(s string) {
		mu.Lock()
		bad = append(bad, s)
		mu.Unlock()
	}
	putTimes := func() (n int64) {
		for i := range b.rt.putDist {
			n += b.rt.putDist[i].Load()
		}
		return n
	}
	var wg sync.WaitGroup
	for g := range conns {
		tc := newTestClient(t, b.Addr())
		wg.Go(func() {
			slots := make(chan struct{}, window)
			var inFlight sync.WaitGroup
			for i := range per {
				k := (g + i) % 2
				body := strings.Repeat("x", 1+(g*per+i)%13)
				h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topics[k], DefaultTopic: AutoCreateTopicKey,
					DefaultTopicQueueNums: 4, QueueID: int32(i % 4), BornTimestamp: time.Now().UnixMilli()}
				slots <- struct{}{}
				inFlight.Add(1)
				err := tc.c.InvokeAsync(context.Background(), tc.addr, protocol.NewRequest(protocol.SendMessageV2, h.V2(), []byte(body)), 30*time.Second,
					func(resp *protocol.Command, err error) {
						defer func() { <-slots; inFlight.Done() }()
						if err != nil || resp.Code != protocol.Success {
							fail("send failed")
							return
						}
						sizes[k].Add(int64(len(body)))
						n, total := answered[k].Add(1), all.Add(1)
						if snap, _ := b.stats.Get(TopicPutNums, topics[k]); snap.Total < n {
							fail("answered before counted: " + topics[k])
						}
						if putTimes() < total {
							fail("answered before its put time was counted")
						}
					})
				if err != nil {
					fail("invoke: " + err.Error())
					<-slots
					inFlight.Done()
				}
			}
			inFlight.Wait()
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d failures, first: %s", len(bad), bad[0])
	}
	for k, topic := range topics {
		nums, _ := b.stats.Get(TopicPutNums, topic)
		size, _ := b.stats.Get(TopicPutSize, topic)
		if nums.Total != answered[k].Load() || size.Total != sizes[k].Load() {
			t.Errorf("%s: counted %d messages of %d bytes, sent %d of %d", topic, nums.Total, size.Total, answered[k].Load(), sizes[k].Load())
		}
	}
	if n, lat := putTimes(), sumLatency(b); n != conns*per || lat != conns*per {
		t.Errorf("put times: %d in the distribution, %d in the latency buckets, for %d sends", n, lat, conns*per)
	}
	// Every send counted out of sendsInFlight once (a send may be
	// counted out right after its answer is written).
	testutil.WaitFor(t, 10*time.Second, "no send in flight", func() bool { return b.sendsInFlight.Load() == 0 })
}

func sumLatency(b *Broker) (n int64) {
	for i := range b.rt.putLatency {
		n += b.rt.putLatency[i].Load()
	}
	return n
}

// BenchmarkBrokerSendCount: what counting a stored send costs the
// answering goroutine, each send on its own (observePut and AddPut, as
// PutDone counts a send no round counted) and a round of 64 at a time
// (sendTally's Count and Flush), each with its count out of the sends in
// flight, from every P (the broker's two readers
// drain each other's sends). ns/op is per send.
func BenchmarkBrokerSendCount(b *testing.B) {
	const round = 64
	newBroker := func() *Broker {
		br := &Broker{stats: NewStats(nil)}
		br.rt = newRuntimeStats(time.Now, func() int64 { return 0 })
		return br
	}
	sends := func(br *Broker) []*pendingSend {
		s := make([]*pendingSend, round)
		for i := range s {
			s[i] = &pendingSend{b: br, msg: record.Message{Topic: "TopicTest", Body: make([]byte, 1024)}}
		}
		return s
	}
	b.Run("each", func(b *testing.B) {
		br := newBroker()
		b.RunParallel(func(pb *testing.PB) {
			s := sends(br)
			for i := 0; pb.Next(); i++ {
				a := s[i%round]
				br.rt.observePut(time.Duration(i%500) * time.Microsecond)
				br.stats.AddPut(a.msg.Topic, 1, int64(len(a.msg.Body)))
				a.release()
			}
		})
	})
	b.Run("round", func(b *testing.B) {
		br := newBroker()
		b.RunParallel(func(pb *testing.PB) {
			s := sends(br)
			t := &sendTally{b: br}
			for i := 0; pb.Next(); i++ {
				t.Count(s[i%round], time.Duration(i%500)*time.Microsecond)
				if i%round == round-1 {
					t.Flush()
				}
			}
			t.Flush()
		})
	})
}

// Sends counted a written-behind round at a time count as one request
// each in their topic's put statistics: VIEW_BROKER_STATS_DATA (mqadmin
// statsAll's source) gives an avgpt of one message, and of one body's
// size, per send request, however many pipelined sends a round counted
// together (it gave the round's count: one add a round).
func TestBrokerSendStatsAvgPerRequest(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tc := newTestClient(t, b.Addr())
	const topic, sends, size = "TallyAvg", 200, 10
	body := []byte(strings.Repeat("y", size))
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
	)
	for range sends {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
		wg.Add(1)
		err := tc.c.InvokeAsync(context.Background(), tc.addr, protocol.NewRequest(protocol.SendMessageV2, h.V2(), body), 30*time.Second,
			func(resp *protocol.Command, err error) {
				defer wg.Done()
				if err != nil || resp.Code != protocol.Success {
					failed.Add(1)
				}
			})
		if err != nil {
			wg.Done()
			t.Fatalf("invoke: %v", err)
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d sends failed", n)
	}
	for _, c := range []struct {
		stat string
		sum  int64
		avg  float64
	}{{"TOPIC_PUT_NUMS", sends, 1}, {"TOPIC_PUT_SIZE", sends * size, size}} {
		sd := decodeBody[protocol.BrokerStatsData](t, javaInvoke(t, b.Addr(), protocol.ViewBrokerStatsData,
			map[string]string{"statsName": c.stat, "statsKey": topic}, nil))
		for _, w := range []protocol.BrokerStatsItem{sd.StatsMinute, sd.StatsHour, sd.StatsDay} {
			if w.Sum != c.sum || w.Avgpt != c.avg {
				t.Errorf("%s: sum %d, avgpt %v; want %d, %v per send", c.stat, w.Sum, w.Avgpt, c.sum, c.avg)
			}
		}
	}
}
