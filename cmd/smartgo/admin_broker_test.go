package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/internal/cluster"
)

// TestCmdAdminBrokerConfig: `broker config` reads a broker's configuration
// (mqadmin getBrokerConfig) and with -set changes what a broker changes
// at run time (updateBrokerConfig); a key it cannot change is refused by
// name and nothing changes. There was no way to do either without Java.
func TestCmdAdminBrokerConfig(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	addr := c.BrokerAddr(0)
	admin := func(args ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
	}
	config := func() map[string]string {
		t.Helper()
		code, out, stderr := admin("broker", "config", "-o", "json")
		var all map[string]map[string]string
		if code != exitOK {
			t.Fatalf("broker config: exit %d: %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &all); err != nil || all[addr] == nil {
			t.Fatalf("broker config -o json: %v\n%s", err, out)
		}
		return all[addr]
	}
	if got := config(); got["autoCreateSubscriptionGroup"] != "true" || got["brokerPermission"] != "6" || got["brokerName"] == "" {
		t.Fatalf("broker config: %v", got)
	}
	code, out, stderr := admin("broker", "config", "-b", addr, "-set", "autoCreateSubscriptionGroup=false", "-set", "brokerPermission=4")
	if code != exitOK || !strings.Contains(out, "broker "+addr+": updated autoCreateSubscriptionGroup=false,brokerPermission=4") {
		t.Fatalf("broker config -set: exit %d: %q %s", code, out, stderr)
	}
	if got := config(); got["autoCreateSubscriptionGroup"] != "false" || got["brokerPermission"] != "4" {
		t.Fatalf("broker config after -set: %v", got)
	}
	code, out, stderr = admin("broker", "config", "-set", "brokerPermission=6", "-set", "flushDiskType=SYNC_FLUSH")
	if code != exitFailure || out != "" || !strings.Contains(stderr, "flushDiskType") {
		t.Fatalf("-set of a key the broker cannot change: exit %d: %q %s", code, out, stderr)
	}
	if got := config(); got["brokerPermission"] != "4" {
		t.Fatalf("a refused -set changed brokerPermission to %s", got["brokerPermission"])
	}
	// -b also takes a broker group's name, for its master (it was dialled
	// as a host: "dial broker-a: missing port in address").
	for _, cmd := range [][]string{{"broker", "config"}, {"broker", "stats"}} {
		code, out, stderr := admin(append(cmd, "-b", "broker-a", "-o", "json")...)
		var byAddr map[string]map[string]string
		if err := json.Unmarshal([]byte(out), &byAddr); code != exitOK || err != nil || len(byAddr) != 1 || byAddr[addr] == nil {
			t.Fatalf("%v -b broker-a: exit %d %v\n%s\n%s", cmd, code, err, out, stderr)
		}
	}
	if code, out, stderr := admin("broker", "config", "-b", "broker-zz"); code != exitFailure || out != "" ||
		!strings.Contains(stderr, `-b "broker-zz": want a broker address (host:port) or a broker group's name; the groups with a master are broker-a`) {
		t.Fatalf("-b of no broker group: exit %d: %q %s", code, out, stderr)
	}
	if code, _, stderr := admin("broker", "config", "-set", "brokerPermission"); code != exitUsage || !strings.Contains(stderr, "want key=value") {
		t.Fatalf("-set without =: exit %d: %s", code, stderr)
	}
	// A broker's address given for the registry's is named as such (it
	// said only "code 3: request type 206 not supported").
	code, out, stderr = runCmd(t, "admin", "-registry", addr, "topic", "list")
	if code != exitFailure || out != "" || !strings.Contains(stderr, addr+" is not a registry: registries listen on port 9876") {
		t.Fatalf("-registry of a broker: exit %d: %q %s", code, out, stderr)
	}
}
