//go:build cluster

package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestClusterProcReplicationRefusedMetric: a slave whose master refuses
// it (here: another segment size) says so on /metrics
// (smartgo_replication_refused{reason="mismatch"} 1, the other reasons
// 0) and is not ready; its master's slave count stays 0.
func TestClusterProcReplicationRefusedMetric(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, mMaster, mSlave := addr(0), addr(3), addr(4)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "broker.advertise_ip=127.0.0.1"}
	master := start(t, dir, "master", append([]string{"broker", "-listen", addr(1), "-data", filepath.Join(dir, "m"),
		"-set", "store.segment_size=8MiB", "-set", "metrics.listen=" + mMaster}, common...)...)
	slave := start(t, dir, "slave", append([]string{"broker", "-listen", addr(2), "-data", filepath.Join(dir, "s"),
		"-set", "store.segment_size=16MiB", "-set", "broker.role=slave", "-set", "broker.id=1", "-set", "metrics.listen=" + mSlave}, common...)...)
	logsOnFailure(t, rp, master, slave)
	waitReady(t, "master", mMaster)

	series := func(reason string) string { return `smartgo_replication_refused{reason="` + reason + `"}` }
	testutil.Eventually(t, 60*time.Second, func() error {
		if code, _ := httpGet(mSlave, "/healthz"); code != 200 {
			return fmt.Errorf("slave not up: %d", code)
		}
		m := scrape(t, mSlave)
		if m[series("mismatch")] != 1 {
			return fmt.Errorf("mismatch refusal not reported: %v", m[series("mismatch")])
		}
		for _, r := range []string{"slave-ahead", "slave-behind", "diverged", "protocol"} {
			if v, ok := m[series(r)]; !ok || v != 0 {
				return fmt.Errorf("%s: %v %v, want 0", r, v, ok)
			}
		}
		return nil
	})
	if code, body := httpGet(mSlave, "/readyz"); code == 200 {
		t.Fatalf("a refused slave reads as ready: %s", body)
	}
	if v, _ := sum(scrape(t, mMaster), "smartgo_replication_slaves"); v != 0 {
		t.Fatalf("the master counts %v slaves", v)
	}
}
