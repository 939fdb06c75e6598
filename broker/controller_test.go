package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/smartgo/smartgo/store"
)

// TestBrokerControllerIdentityPinned pins config/controller.json (see
// ctrlIdentity): written once, read back, a damaged file refused.
func TestBrokerControllerIdentityPinned(t *testing.T) {
	dir := t.TempDir()
	b := &Broker{opts: Options{Store: store.Options{Root: dir}}, log: slog.New(slog.DiscardHandler), ctl: &ctrlState{id: 3, token: "00ff"}}
	if err := b.saveIdentity(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "config", "controller.json"))
	if err != nil || string(data) != `{"brokerId":3,"token":"00ff"}` {
		t.Fatalf("identity file %q %v", data, err)
	}
	b2 := &Broker{opts: b.opts, log: b.log, ctl: &ctrlState{}}
	if err := b2.loadIdentity(); err != nil || b2.ctl.id != 3 || b2.ctl.token != "00ff" {
		t.Fatalf("loaded %+v %v", b2.ctl, err)
	}
	fresh := &Broker{opts: Options{Store: store.Options{Root: t.TempDir()}}, log: b.log, ctl: &ctrlState{}}
	if err := fresh.loadIdentity(); err != nil || len(fresh.ctl.token) != 32 || fresh.ctl.id != 0 {
		t.Fatalf("new identity %+v %v", fresh.ctl, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "controller.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b2.loadIdentity(); err == nil {
		t.Fatal("damaged identity file accepted")
	}
}
