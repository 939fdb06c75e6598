package console

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// samplerCluster starts an in-process cluster and an admin client of it,
// both closed when the test ends.
func samplerCluster(ctx context.Context, t *testing.T) (*cluster.Cluster, *admin.Admin) {
	t.Helper()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return c, adm
}

// TestConsoleSamplerRates: against a real cluster, the sampler turns the
// brokers' totals into per-topic and total rates, counts a topic that
// appears between two rounds from zero, and serves the busiest series.
func TestConsoleSamplerRates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, adm := samplerCluster(ctx, t)
	clk := &clock{t: time.Now()}
	s := newSampler(adm, time.Second, time.Minute, clk.now, slog.New(slog.DiscardHandler))
	s.sample(ctx) // the first round: a baseline
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 20 {
		if _, err := p.Send(ctx, &client.Message{Topic: "SampledT", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(2 * time.Second)
	s.sample(ctx)
	got := s.query([]string{"total:put"}, "topic:", 3, 0)
	pts := got["topic:SampledT"]
	if len(pts) != 1 || pts[0].V != 10 { // 20 messages over 2 s, new since the last round
		t.Fatalf("topic series: %+v (all %+v)", pts, got)
	}
	if tot := got["total:put"]; len(tot) != 1 || tot[0].V < 10 {
		t.Fatalf("total series: %+v", tot)
	}
	clk.add(time.Second)
	s.sample(ctx)
	if pts := s.query(nil, "topic:", 3, 0)["topic:SampledT"]; len(pts) != 2 || pts[1].V != 0 {
		t.Fatalf("idle round: %+v", pts)
	}
	if lat := s.latest("topic:"); lat["SampledT"] != 0 {
		t.Fatalf("latest: %v", lat)
	}
	// since keeps only newer points.
	if pts := s.query([]string{"topic:SampledT"}, "", 0, pts[0].T)["topic:SampledT"]; len(pts) != 1 {
		t.Fatalf("since: %+v", pts)
	}
}

// TestConsoleSamplerForgetsDeletedTopics: topics and a group that are
// deleted (DELETE_TOPIC_IN_BROKER, DELETE_SUBSCRIPTIONGROUP) leave the
// broker's statistics, its /metrics and runtime info, and the console's
// series at the next round, without reading as a drop of the totals;
// created and deleted over and over, they leave nothing behind.
func TestConsoleSamplerForgetsDeletedTopics(t *testing.T) {
	const topics, cycles = 20, 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, adm := samplerCluster(ctx, t)
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	clk := &clock{t: time.Now()}
	s := newSampler(adm, time.Second, time.Minute, clk.now, slog.New(slog.DiscardHandler))
	// A topic that stays, with many messages: were the deleted topics'
	// counters read as its broker restarting, its total would show as a
	// burst of the put rate.
	for range 100 {
		if _, err := p.Send(ctx, &client.Message{Topic: "KeptT", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	s.sample(ctx)
	clk.add(2 * time.Second)
	s.sample(ctx) // the baseline: KeptT's series, at 0
	// metrics returns the broker's /metrics series naming a deleted
	// topic or group (their names start with "Gone").
	metrics := func() []string {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c.Broker(0).Collectors()...)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.HasPrefix(l.GetValue(), "Gone") {
						out = append(out, f.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}")
					}
				}
			}
		}
		return out
	}
	// counted is the number of topic and group series.
	counted := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for name := range s.series {
			if strings.HasPrefix(name, "topic:") || strings.HasPrefix(name, "group:") {
				n++
			}
		}
		return n
	}
	baseline := counted()
	s.mu.Lock()
	counters := len(s.prev)
	s.mu.Unlock()
	for cycle := range cycles {
		group := fmt.Sprintf("GoneGroup%d", cycle)
		names := make([]string, topics)
		for i := range names {
			names[i] = fmt.Sprintf("GoneT%d_%d", cycle, i)
			if _, err := p.Send(ctx, &client.Message{Topic: names[i], Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
			ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}, Group: group}})
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Subscribe(names[0], "*"); err != nil {
			t.Fatal(err)
		}
		if err := pc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			if msgs, err := pc.Poll(ctx); err != nil || len(msgs) == 0 {
				return fmt.Errorf("polled %d messages: %v", len(msgs), err)
			}
			return nil
		})
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
		clk.add(2 * time.Second)
		s.sample(ctx)
		if got := s.latest("topic:"); len(got) < topics || s.latest("group:")[group] == 0 {
			t.Fatalf("cycle %d: series before the deletes: topics %v, groups %v", cycle, got, s.latest("group:"))
		}
		if len(metrics()) == 0 {
			t.Fatalf("cycle %d: no /metrics series of the topics before the deletes", cycle)
		}
		clk.add(2 * time.Second)
		s.sample(ctx) // an idle round: every rate 0
		for _, name := range names {
			if err := adm.DeleteTopic(ctx, "", name); err != nil {
				t.Fatal(err)
			}
		}
		if err := adm.DeleteGroup(ctx, "", group, true); err != nil {
			t.Fatal(err)
		}
		if got := metrics(); len(got) != 0 {
			t.Fatalf("cycle %d: /metrics still lists deleted topics and groups: %v", cycle, got)
		}
		info, err := adm.BrokerRuntimeInfo(ctx, c.BrokerAddr(0))
		if err != nil {
			t.Fatal(err)
		}
		for k := range info {
			if strings.Contains(k, ".Gone") {
				t.Fatalf("cycle %d: runtime info still lists %s", cycle, k)
			}
		}
		clk.add(2 * time.Second)
		s.sample(ctx)
		for _, prefix := range []string{"topic:Gone", "group:Gone"} {
			if got := s.query(nil, prefix, 1000, 0); len(got) != 0 {
				t.Fatalf("cycle %d: console series of deleted topics and groups left: %v", cycle, got)
			}
		}
		// Nothing was sent or pulled in that round (but for what the
		// cluster may write to its own topics): no burst (50/s and more).
		tot := s.query([]string{"total:put", "total:get"}, "", 0, clk.now().Add(-time.Second).UnixMilli())
		if len(tot["total:put"]) != 1 || len(tot["total:get"]) != 1 || tot["total:put"][0].V >= 10 || tot["total:get"][0].V >= 10 {
			t.Fatalf("cycle %d: totals after the deletes (want about 0, not a drop read as a restart): %v", cycle, tot)
		}
	}
	n := counted()
	s.mu.Lock()
	prev := len(s.prev)
	s.mu.Unlock()
	if n != baseline || prev != counters {
		t.Fatalf("%d topic and group series (%d counters) after %d cycles of %d topics created and deleted, %d (%d) before",
			n, prev, cycles, topics, baseline, counters)
	}
}

// TestConsoleSamplerTopRanksByPeak: the busiest series of a kind are the
// ones with the highest point in the span asked for, so a burst a few
// rounds ago stays on the chart after its topic went quiet.
func TestConsoleSamplerTopRanksByPeak(t *testing.T) {
	s := newSampler(nil, time.Second, time.Minute, time.Now, slog.New(slog.DiscardHandler))
	s.mu.Lock()
	for i, v := range []float64{0, 500, 0, 0} { // a burst, then quiet
		s.addLocked("topic:Burst", point{T: int64(1000 * (i + 1)), V: v})
	}
	for i := range 4 { // steady, small
		for _, n := range []string{"topic:A", "topic:B"} {
			s.addLocked(n, point{T: int64(1000 * (i + 1)), V: 1})
		}
	}
	s.mu.Unlock()
	if got := s.query(nil, "topic:", 1, 0); len(got["topic:Burst"]) != 4 {
		t.Fatalf("top 1 over the whole span: %v, want topic:Burst", got)
	}
	// Since after the burst: the steady ones are busier.
	if got := s.query(nil, "topic:", 1, 2000); got["topic:Burst"] != nil {
		t.Fatalf("top 1 since the burst: %v, want a steady topic", got)
	}
}
