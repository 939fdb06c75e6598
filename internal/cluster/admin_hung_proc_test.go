//go:build cluster

// `smartgo admin topic create|update|delete` while one broker group's
// master is hung (SIGSTOP), all separate processes.

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterProcAdminTopicMasterHung: with broker-b's master hung, `admin
// topic create`, `topic update` and `topic delete` act on broker-a, print
// that they did (naming it), name broker-b's address as not answering and
// exit 1; they used to print only the error (the other master changed
// all the same, silently).
func TestClusterProcAdminTopicMasterHung(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, masterB := addr(0), addr(1), addr(2)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	ma := start(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	mb := start(t, dir, "master-b", append([]string{"broker", "-listen", masterB, "-data", filepath.Join(dir, "mb"),
		"-set", "broker.name=broker-b"}, common...)...)
	t.Cleanup(func() { _ = mb.cmd.Process.Signal(syscall.SIGCONT) })
	logsOnFailure(t, rp, ma, mb)
	adm, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	testutil.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ms, err := adm.Masters(ctx, "")
		if err != nil || len(ms) != 2 {
			return fmt.Errorf("masters %+v: %v", ms, err)
		}
		return nil
	})
	// hasTopic asks a broker directly whether it has topic.
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	hasTopic := func(addr, topic string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.GetTopicStatsInfo, &protocol.TopicHeader{Topic: topic}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Code == protocol.Success
	}

	mb.pause(t)
	check := func(what string, code int, out string, want ...string) {
		t.Helper()
		if code != 1 || !strings.Contains(out, "some broker groups did not answer") || !strings.Contains(out, masterB) {
			t.Fatalf("%s with broker-b hung: exit %d, output %q", what, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s with broker-b hung: output %q lacks %q", what, out, w)
			}
		}
	}
	code, out := runAdmin(t, "admin", "-registry", reg, "-timeout", "20s", "topic", "create", "-t", "HungT", "-r", "2", "-w", "2")
	check("topic create", code, out, "topic HungT: ok (created) on broker-a")
	if !hasTopic(masterA, "HungT") {
		t.Fatal("broker-a does not have the topic created")
	}
	code, out = runAdmin(t, "admin", "-registry", reg, "-timeout", "20s", "topic", "update", "-t", "HungT", "-perm", "4")
	check("topic update", code, out, "topic HungT: ok (updated) on broker-a")
	code, out = runAdmin(t, "admin", "-registry", reg, "-timeout", "20s", "-o", "json", "topic", "delete", "-t", "HungT")
	check("topic delete", code, out, `"deleted": false`, `"broker-a"`)
	if hasTopic(masterA, "HungT") {
		t.Fatal("broker-a still has the topic deleted")
	}
}
