package rocketmq

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestInteropMQTTRefusalReasonIsValidUTF8: a QoS 1 PUBLISH the broker
// refuses (a body over store.max_message_size) on a topic of two-byte
// characters gets PUBACK 0x83 (implementation specific error: a message
// no broker record can hold, 7e7c330; 0x80 before) with a reason string
// mosquitto_pub accepts.
// The reason quotes the topic and was cut at 200 bytes inside a
// character, so mosquitto_pub refused the PUBACK as malformed UTF-8 and
// never learnt the reason code; the same happened to the line break that
// joins two errors (a send refused for a full disk, then no route). The
// reason quoted all of the topic first, so a long one left no room for
// the cause.
func TestInteropMQTTRefusalReasonIsValidUTF8(t *testing.T) {
	pub := mosquittoOrSkip(t, "mosquitto_pub")
	k := startKillable(t, "store.max_message_size=1KiB")
	host, port, _ := net.SplitHostPort(k.mqtt)
	topic := "a" + strings.Repeat("é", 120) // the whole topic put the reason's byte 200 inside an é
	out, err := exec.Command(pub, "-V", "5", "-h", host, "-p", port, "-i", "reason-utf8", "-q", "1", "-d",
		"-t", topic, "-m", strings.Repeat("z", 2000)).CombinedOutput()
	t.Logf("mosquitto_pub: %v\n%s", err, out)
	if strings.Contains(string(out), "Malformed UTF-8") {
		t.Fatal("mosquitto_pub refused the PUBACK's reason string as malformed UTF-8")
	}
	if !strings.Contains(string(out), "RC:131") || !strings.Contains(string(out), "Publish 1 failed: Implementation specific error") {
		t.Fatal("mosquitto_pub did not get PUBACK 0x83 with the reason")
	}
	// The reason quotes the start of the topic only, so the cause fits:
	// the broker's MESSAGE_ILLEGAL (13) with RocketMQ's remark (f55445f).
	if !strings.Contains(string(out), "code 13: the message is illegal") {
		t.Error("the reason string lacks its cause")
	}
}
