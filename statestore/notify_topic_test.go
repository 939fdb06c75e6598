package statestore

import (
	"strings"
	"testing"
	"time"
)

// A KEYNOTIFY is refused with the quota error when the notification
// topic of the key (the client id and the key in hex) would be longer
// than MQTT carries: registered, its every notification was dropped by
// the MQTT server (a 64 KiB key is a valid key). The longest key that
// fits is watched and its notification topic is exactly MaxTopicLen
// bytes; a longer client id leaves room for a shorter key only; STOP of
// such a key is not refused (it answers :0).
func TestStateStoreKeyNotifyTopicTooLong(t *testing.T) {
	for _, clientID := range []string{"c", "a-23-byte-client-id-xyz", strings.Repeat("i", 1000)} {
		e := mustEngine(t, Options{})
		longest := (MaxTopicLen - NotifyTopicLen(len(clientID), 0)) / 2
		keyNotify := func(key string, stop bool) string {
			t.Helper()
			args := []string{"KEYNOTIFY", key}
			if stop {
				args = append(args, "STOP")
			}
			_, out, needsLog := e.Prepare(&Request{Payload: cmd(args...), ClientID: clientID}, t0)
			if needsLog {
				t.Fatalf("KEYNOTIFY logged")
			}
			return string(out.Reply.Payload)
		}
		fits, over := strings.Repeat("k", longest), strings.Repeat("k", longest+1)
		if got := keyNotify(over, false); got != "-ERR "+ErrQuota.Text()+"\r\n" {
			t.Fatalf("client %d bytes: KEYNOTIFY of a %d-byte key: %q, want the quota error", len(clientID), len(over), got)
		}
		if got := keyNotify(over, true); got != ":0\r\n" {
			t.Fatalf("client %d bytes: KEYNOTIFY STOP of the refused key: %q", len(clientID), got)
		}
		if got := keyNotify(fits, false); got != "+OK\r\n" {
			t.Fatalf("client %d bytes: KEYNOTIFY of a %d-byte key: %q", len(clientID), len(fits), got)
		}
		set := &Request{Payload: cmd("SET", fits, "v"), ClientID: "w"}
		set.SetUserProperty(PropTimestamp, "1696374425000:0:w")
		entry, _, _ := e.Prepare(set, t0)
		out := apply(t, e, entry, t0.Add(time.Millisecond))
		if len(out.Notifications) != 1 {
			t.Fatalf("client %d bytes: %d notifications of the watched key", len(clientID), len(out.Notifications))
		}
		if n := len(out.Notifications[0].Topic()); n != MaxTopicLen {
			t.Fatalf("client %d bytes: notification topic %d bytes, want %d", len(clientID), n, MaxTopicLen)
		}
	}
	e := mustEngine(t, Options{})
	_, out, _ := e.Prepare(&Request{Payload: cmd("KEYNOTIFY", "k"), ClientID: strings.Repeat("i", MaxTopicLen/2)}, t0)
	if string(out.Reply.Payload) != "-ERR "+ErrQuota.Text()+"\r\n" {
		t.Fatalf("KEYNOTIFY of a client whose id alone is too long: %q", out.Reply.Payload)
	}
}
