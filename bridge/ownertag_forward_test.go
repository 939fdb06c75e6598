package bridge

import (
	"testing"

	"github.com/smartgo/smartgo/mqtt"
)

// plainWrapper is a WrapBackend result that forwards nothing but the
// mqtt.Backend methods (as cmd's state store session hook does).
type plainWrapper struct{ mqtt.Backend }

// The IoT hub tags each session with the device identity it was for
// (Backend.SetOwnerTag); the MQTT server reads the tag through the
// backend it was given. Behind a wrapper that does not forward it (every
// bridge in smartgo bridge and standalone is wrapped), the server got no
// tag, so an in-memory session was resumed for a new identity of the
// same device id. The forward passes the tag on.
func TestBridgeWrappedBackendForwardsOwnerTag(t *testing.T) {
	be := &Backend{}
	be.SetOwnerTag(func(id string) string { return "gen-of-" + id })
	var sb mqtt.Backend = &subscriptionForward{Backend: plainWrapper{be}, be: be}
	ot, ok := sb.(mqtt.OwnerTagger)
	if !ok {
		t.Fatal("the forward does not implement mqtt.OwnerTagger")
	}
	if got := ot.OwnerTag("dev1"); got != "gen-of-dev1" {
		t.Fatalf("OwnerTag = %q, want gen-of-dev1", got)
	}
}
