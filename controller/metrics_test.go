package controller

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// gather returns a replica's series as "name{label=value}" -> value.
func gather(t *testing.T, c *Controller) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			k := f.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestControllerMetrics: a replica's /metrics series follow its Raft
// state and the groups it manages, and say when it lost its quorum.
func TestControllerMetrics(t *testing.T) {
	rs := startReplicas(t, 3, nil)
	l := rs.leader()
	b := newFakeBroker(t, rs.addrs(), "g", "t1")
	b.register()
	b.startHeartbeats()
	g := groupOn(t, b, "a master", func(g protocol.ControllerGroup) bool { return g.MasterID != 0 })
	m := gather(t, rs.ctrls[l])
	for k, want := range map[string]float64{
		"smartgo_controller_raft_state{state=Leader}":           1,
		"smartgo_controller_raft_state{state=Follower}":         0,
		"smartgo_controller_leader_known":                       1,
		"smartgo_controller_last_contact_seconds":               0,
		"smartgo_controller_group_master_id{group=g}":           float64(g.MasterID),
		"smartgo_controller_group_master_epoch{group=g}":        1,
		"smartgo_controller_group_sync_state_set_size{group=g}": 1,
		"smartgo_controller_group_brokers_alive{group=g}":       1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v; all: %v", k, got, ok, want, m)
		}
	}
	if m["smartgo_controller_raft_term"] < 1 {
		t.Errorf("term %v", m["smartgo_controller_raft_term"])
	}

	// Two replicas go: the last one has no quorum and says so.
	last := (l + 1) % 3
	for i := range 3 {
		if i != last {
			rs.stop(i)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		m = gather(t, rs.ctrls[last])
		if m["smartgo_controller_leader_known"] != 0 || m["smartgo_controller_raft_state{state=Leader}"] != 0 {
			return fmt.Errorf("still a leader known: %v", m)
		}
		return nil
	})
}
