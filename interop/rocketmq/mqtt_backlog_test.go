package rocketmq

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	pp "github.com/eclipse/paho.golang/packets"
)

// TestInteropMQTTResumedBacklogOverOfflineLimitAcrossKill9: a persistent
// session that has not acknowledged a stream of QoS 1 messages (a slow
// subscriber) when the standalone is killed with SIGKILL gets every one
// of them after the restart, though they are more than
// bridge.max_offline_messages: the first that many are handed over at
// once, the rest read back from the log as the session drains. They used
// to be dropped (acknowledged messages lost for a subscriber that was
// connected the whole time).
func TestInteropMQTTResumedBacklogOverOfflineLimitAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process")
	}
	pubBin := mosquittoOrSkip(t, "mosquitto_pub")
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	const limit, n = 50, 400
	// No checkpoint of the session during the test: after the restart it
	// resumes from its claim at connect, before the whole stream.
	k := startKillable(t, fmt.Sprintf("bridge.max_offline_messages=%d", limit), "bridge.checkpoint_interval=10m")
	sub, _ := dialMQTT(t, k.mqtt, "backlog-sub", true)
	sub.subscribe(1, "backlog/#", 1)
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "b%04d\n", i)
	}
	host, port, _ := net.SplitHostPort(k.mqtt)
	pub := exec.Command(pubBin, "-V", "mqttv5", "-h", host, "-p", port, "-i", "backlog-pub", "-q", "1", "-t", "backlog/x", "-l")
	pub.Stdin = strings.NewReader(lines.String())
	if out, err := pub.CombinedOutput(); err != nil { // every PUBLISH acknowledged
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	// The subscriber is slow: it reads the first and acknowledges none.
	expect[*pp.Publish](sub)
	k.kill9Restart(t)

	out, err := exec.Command(subBin, "-V", "mqttv5", "-h", host, "-p", port, "-i", "backlog-sub", "-c", "-x", "600",
		"-q", "1", "-t", "backlog/#", "-C", fmt.Sprint(n), "-W", "60").CombinedOutput()
	got := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		got[l] = true
	}
	var missing []string
	for i := range n {
		if b := fmt.Sprintf("b%04d", i); !got[b] {
			missing = append(missing, b)
		}
	}
	if err != nil || len(missing) > 0 {
		t.Fatalf("after the restart the subscriber got %d of %d (mosquitto_sub: %v); missing %d, first %v",
			len(got), n, err, len(missing), missing[:min(5, len(missing))])
	}
}
