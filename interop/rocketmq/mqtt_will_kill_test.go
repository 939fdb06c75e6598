package rocketmq

import (
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"
)

// dialWill connects clientID (MQTT 5, paho.golang's codec) with a will of
// "offline <id>" on will/<id> after delay seconds; expiry 0: a session
// that ends with its connection. After the CONNACK it pings the server:
// the server stores the will before it reads the next packet.
func dialWill(t *testing.T, addr, clientID string, clean bool, expiry, delay uint32) (*mqttRaw, bool) {
	t.Helper()
	c, present := dialConnect(t, addr, clientID, clean, expiry, func(cc *pp.Connect) {
		cc.WillFlag, cc.WillQOS, cc.WillTopic, cc.WillMessage = true, 1, "will/"+clientID, []byte("offline "+clientID)
		cc.WillProperties = &pp.Properties{WillDelayInterval: &delay}
	})
	c.send(pp.NewControlPacket(pp.PINGREQ))
	expect[*pp.Pingresp](c)
	return c, present
}

// TestInteropMQTTWillAcrossKill9: wills of clients connected to a
// standalone that is killed with SIGKILL are published once after it
// restarts: a client with a will and no delay (a session that ends with
// its connection) gets it published though it does not come back; a
// client whose will has a delay and that resumes its session at once
// after the restart gets none; a client that disconnected normally
// before the kill gets none. A watcher with a persistent session
// subscribed to will/# sees exactly that; mosquitto_sub resuming its
// session gets will-gone's will.
func TestInteropMQTTWillAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process")
	}
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	k := startKillable(t, "bridge.heartbeat_interval=1s")
	host, port, _ := net.SplitHostPort(k.mqtt)
	// mosquitto_sub with a persistent session subscribed to will/#: it
	// resumes after the restart and prints the first will it gets.
	msub := func(extra ...string) *exec.Cmd {
		return exec.Command(subBin, append([]string{"-V", "mqttv5", "-h", host, "-p", port, "-i", "will-msub", "-c",
			"-x", "600", "-q", "1", "-t", "will/#"}, extra...)...)
	}
	if out, err := msub("-E").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_sub: %v %s", err, out)
	}
	watcher, _ := dialMQTT(t, k.mqtt, "will-watcher", true)
	watcher.subscribe(1, "will/#", 1)

	dialWill(t, k.mqtt, "will-gone", true, 0, 0)
	back, _ := dialWill(t, k.mqtt, "will-back", false, 600, 8)
	back.subscribe(1, "cmd/will-back", 1) // a stored session, resumed below
	bye, _ := dialWill(t, k.mqtt, "will-bye", true, 0, 0)
	bye.send(pp.NewControlPacket(pp.DISCONNECT))
	// The server closes the connection once it has handled the
	// DISCONNECT (the will dropped): a connection of the client that
	// came first would take the session over and publish the will.
	_ = bye.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, bye.r); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("will-bye's connection after its DISCONNECT: %v", err)
	}
	bye.nc.Close()
	// The server is done with that connection once a new one of the
	// client (no will) is: a kill before would race its DISCONNECT.
	bye, _ = dialMQTT(t, k.mqtt, "will-bye", true)
	bye.send(pp.NewControlPacket(pp.PINGREQ))
	expect[*pp.Pingresp](bye)
	bye.send(pp.NewControlPacket(pp.DISCONNECT))
	bye.nc.Close()

	k.kill9Restart(t)
	back, present := dialWill(t, k.mqtt, "will-back", false, 600, 8)
	if !present {
		t.Fatal("will-back's session lost with the process")
	}
	defer back.nc.Close()
	out, err := msub("-v", "-C", "1", "-W", "60").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "will/will-gone offline will-gone" {
		t.Fatalf("mosquitto_sub after the restart: %v %q", err, out)
	}
	watcher, present = dialMQTT(t, k.mqtt, "will-watcher", false)
	if !present {
		t.Fatal("watcher's session lost with the process")
	}

	// will-gone's will comes once the restarted node has seen the old one
	// gone (two looks at the registry, a second apart); will-back's would
	// come 8 s after that.
	pub := expect[*pp.Publish](watcher)
	if pub.Topic != "will/will-gone" || string(pub.Payload) != "offline will-gone" {
		t.Fatalf("first will after the restart: %s %q", pub.Topic, pub.Payload)
	}
	if pub.QoS == 1 {
		watcher.ack(pp.PUBACK, pub.PacketID)
	}
	_ = watcher.nc.SetReadDeadline(time.Now().Add(12 * time.Second))
	if cp, err := pp.ReadPacket(watcher.r); err == nil {
		t.Fatalf("more after will-gone's will: %s", cp)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatal(err)
	}
}
