package console

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
)

// TestConsoleSamplerRates: against a real cluster, the sampler turns the
// brokers' totals into per-topic and total rates, counts a topic that
// appears between two rounds from zero, and serves the busiest series.
func TestConsoleSamplerRates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
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
