//go:build cluster

package cluster

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/console"
)

// TestClusterProcConsoleTwinsMasterHung: while a master hangs (SIGSTOP:
// its connections stay up, it answers nothing), the console's device
// list and twin pages answer 200 from its slave's replica, marked with
// console.PartialHeader, within the console's request timeout, as for a
// dead master. Before, the read waited for the master until the timeout
// and the page failed.
func TestClusterProcConsoleTwinsMasterHung(t *testing.T) {
	const devices = 12
	const timeout = 6 * time.Second
	s := startTwinsReplicaSet(t, devices, timeout)
	ma, slaveA, u := s.ma, s.slaveA, s.u

	// get reads a console page: status, PartialHeader, decoded body, and
	// how long it took.
	get := func(path string, out any) (int, string, time.Duration, error) {
		start := time.Now()
		resp, err := u.hc.Get(u.base + path)
		if err != nil {
			return 0, "", time.Since(start), err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return resp.StatusCode, "", time.Since(start), err
			}
		}
		return resp.StatusCode, resp.Header.Get(console.PartialHeader), time.Since(start), nil
	}
	var p struct {
		Devices []struct {
			DeviceID string `json:"deviceId"`
		} `json:"devices"`
	}
	if code, partial, _, err := get("/api/twins?pageSize=100", &p); err != nil || code != http.StatusOK || partial != "" || len(p.Devices) != devices {
		t.Fatalf("master up: /api/twins %d %q %v: %d devices", code, partial, err, len(p.Devices))
	}

	ma.pause(t)
	t.Cleanup(func() { _ = ma.cmd.Process.Signal(syscall.SIGCONT) })
	var d struct {
		Twin struct {
			Tags struct {
				N int `json:"n"`
			} `json:"tags"`
		} `json:"twin"`
	}
	code, partial, took, err := get("/api/twins/dev07", &d)
	if err != nil || code != http.StatusOK || d.Twin.Tags.N != 7 || !strings.Contains(partial, slaveA) {
		t.Fatalf("master hung: /api/twins/dev07: %d %q %v %+v after %v", code, partial, err, d, took)
	}
	if took > timeout {
		t.Fatalf("master hung: /api/twins/dev07 took %v, over the console's %v", took, timeout)
	}
	p.Devices = nil
	code, partial, took, err = get("/api/twins?pageSize=100", &p)
	if err != nil || code != http.StatusOK || len(p.Devices) != devices || !strings.Contains(partial, slaveA) || took > timeout {
		t.Fatalf("master hung: /api/twins: %d %q %v: %d devices after %v", code, partial, err, len(p.Devices), took)
	}
}
