package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// ssCommands returns smartgo_statestore_commands_total by "command/result"
// as a registry gathers it.
func ssCommands(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "smartgo_statestore_commands_total" {
			continue
		}
		if mf.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("commands_total is a %v", mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			var cmd, res string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "command":
					cmd = l.GetValue()
				case "result":
					res = l.GetValue()
				}
			}
			out[cmd+"/"+res] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestStateStoreCommandMetrics: the commands counted on each shard (served
// at once, deferred to a batch end, refused for a shard that is not ours)
// add up to smartgo_statestore_commands_total, every verb and result
// reported, zero included; the timed ones reach the latency histogram.
func TestStateStoreCommandMetrics(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	if got := ssCommands(t, reg); len(got) != 2*len(ssVerbs) || got["SET/ok"] != 0 {
		t.Fatalf("before any command: %v", got)
	}

	const sets = 20 // over the 4 shards
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for i := 0; i < sets; i++ {
		k := keys[i%len(keys)]
		ssDo(t, s, "c", "SET", k, "v")
		ssDo(t, s, "c", "GET", k)
	}
	// A SET deferred to its caller's batch end counts when completed.
	set := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf([]byte("z"), s.Shards())), ClientID: "c",
		Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), []byte("z"), []byte("v"))}
	cmd, err := statestore.ParseCommand(set.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp protocol.StateStoreResponse
	p, err := s.InvokeDeferred(context.Background(), set, &cmd, nil, &resp)
	if err != nil || p == nil {
		t.Fatalf("deferred SET: %v %v", p, err)
	}
	if err := p.Complete(&resp); err != nil || string(resp.Reply) != "+OK\r\n" {
		t.Fatalf("deferred SET completed: %q %v", resp.Reply, err)
	}
	// A shard that is not this broker's: not served.
	bad := &protocol.StateStoreRequest{Shard: 99, ClientID: "c", Payload: statestore.AppendRequest(nil, []byte("GET"), []byte("a"))}
	if _, err := s.Do(context.Background(), bad, nil); !errors.Is(err, ErrStateStoreNotOwner) {
		t.Fatalf("shard 99: %v", err)
	}

	got := ssCommands(t, reg)
	want := map[string]float64{"SET/ok": sets + 1, "GET/ok": sets, "GET/error": 1}
	for _, v := range ssVerbs {
		for _, r := range []string{"ok", "error"} {
			if k := v + "/" + r; got[k] != want[k] {
				t.Errorf("%s: %v, want %v (all: %v)", k, got[k], want[k], got)
			}
		}
	}
	var timed uint64
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "smartgo_statestore_command_latency_seconds" {
			for _, m := range mf.GetMetric() {
				timed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	// One command in latencySample of each shard's is timed, its first
	// included: at least one, at most what a shared count would time plus
	// one per shard.
	if total := uint64(2*sets + 2); timed == 0 || timed > total/latencySample+uint64(s.Shards())+1 {
		t.Fatalf("%d of %d commands timed", timed, total)
	}
}
