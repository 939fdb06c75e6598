package rocketmq

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropMQTTSharedSubscriptionAcrossKill9: messages of a shared
// subscription that its member received and had not acknowledged when
// the standalone was killed with SIGKILL reach the member again after the
// restart (mosquitto_sub resuming the session). The group's consumer used
// to commit its offsets as it polled, so a crash after the poll lost
// them; they now move on as members acknowledge.
func TestInteropMQTTSharedSubscriptionAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process")
	}
	pubBin := mosquittoOrSkip(t, "mosquitto_pub")
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	// No checkpoint of the member's session during the test: what it
	// holds comes back from the group's offsets alone.
	k := startKillable(t, "bridge.checkpoint_interval=10m", "broker.consumer_offset_persist_interval=100ms")
	host, port, _ := net.SplitHostPort(k.mqtt)
	const share = "$share/g/jobs/#"

	member, _ := dialMQTT(t, k.mqtt, "share-member", true)
	member.subscribe(1, share, 1)
	pub := exec.Command(pubBin, "-V", "mqttv5", "-h", host, "-p", port, "-i", "jobs-pub", "-q", "1", "-t", "jobs/x", "-l")
	pub.Stdin = strings.NewReader("job1\njob2\njob3\njob4\njob5\n")
	if out, err := pub.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	// The member gets all five and acknowledges only job1.
	got := map[string]bool{}
	for len(got) < 5 {
		p := expect[*pp.Publish](member)
		got[string(p.Payload)] = true
		if string(p.Payload) == "job1" {
			member.ack(pp.PUBACK, p.PacketID)
		}
	}
	// The group's progress is on the broker's disk with job1 consumed
	// (the broker persists offsets every 100 ms here; a kill -9 loses what
	// it committed since): before, all five were committed as polled.
	h := fnv.New64a()
	h.Write([]byte(share))
	key := fmt.Sprintf("MQTT_INGRESS@MQTT_SHARE_g_%016x", h.Sum64())
	testutil.WaitFor(t, 30*time.Second, "the group's progress persisted", func() bool {
		files, _ := filepath.Glob(filepath.Join(k.dir, "data", "*", "config", "consumerOffset.json"))
		files2, _ := filepath.Glob(filepath.Join(k.dir, "data", "config", "consumerOffset.json"))
		for _, f := range append(files, files2...) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var tab struct {
				OffsetTable map[string]map[string]int64 `json:"offsetTable"`
			}
			if json.Unmarshal(b, &tab) != nil {
				continue
			}
			for _, off := range tab.OffsetTable[key] {
				if off > 0 {
					return true
				}
			}
		}
		return false
	})
	k.kill9Restart(t)

	host, port, _ = net.SplitHostPort(k.mqtt)
	out, err := exec.Command(subBin, "-V", "mqttv5", "-h", host, "-p", port, "-i", "share-member", "-c", "-x", "600",
		"-q", "1", "-t", share, "-C", "4", "-W", "20").CombinedOutput()
	if err != nil {
		t.Fatalf("mosquitto_sub after the restart: %v %q", err, out)
	}
	lines := strings.Fields(string(out))
	slices.Sort(lines)
	if want := []string{"job2", "job3", "job4", "job5"}; !slices.Equal(lines, want) {
		t.Fatalf("after the restart the member got %q, want %q", lines, want)
	}
}
