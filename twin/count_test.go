package twin

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Counts answered from the index's posting sizes equal the counts of a
// scan (the reference evaluates every twin), through updates that move,
// remove and retype values; queries the index cannot answer are counted
// by the scan.
func TestTwinCountFromIndexMatchesScan(t *testing.T) {
	e := mustEngine(t, Options{IndexPaths: []string{"properties.reported.fw", "properties.desired.mode"}})
	rng := rand.New(rand.NewPCG(5, 6))
	regions := []string{`"us"`, `"eu"`, `"apac"`, `3`, `true`, `-0`, `0`, `0.5`}
	write := func(i int) {
		id := fmt.Sprintf("dev%03d", i)
		var tags string
		switch rng.IntN(6) {
		case 0:
			tags = `{"tags":{"region":null}}` // removed
		case 1:
			tags = fmt.Sprintf(`{"tags":{"region":%s,"site":{"b":%d}}}`, regions[rng.IntN(len(regions))], rng.IntN(3))
		default:
			tags = fmt.Sprintf(`{"tags":{"region":%s,"floor":%d}}`, regions[rng.IntN(len(regions))], rng.IntN(4))
		}
		do(t, e, &Request{Op: OpUpdateTwin, DeviceID: id, Body: []byte(tags)}, t0)
		do(t, e, &Request{Op: OpPatchReported, DeviceID: id, Body: []byte(fmt.Sprintf(`{"fw":"1.%d","b":%d}`, rng.IntN(3), rng.IntN(100)))}, t0)
		if rng.IntN(3) == 0 {
			do(t, e, &Request{Op: OpSetConnection, DeviceID: id, Connected: rng.IntN(2) == 0, ConnID: "x"}, t0)
		}
	}
	for i := 0; i < 300; i++ {
		newDevice(t, e, fmt.Sprintf("dev%03d", i))
		write(i)
		if i%6 == 0 {
			do(t, e, &Request{Op: OpPutModule, DeviceID: fmt.Sprintf("dev%03d", i), ModuleID: "m"}, t0)
			do(t, e, &Request{Op: OpPatchReported, DeviceID: fmt.Sprintf("dev%03d", i), ModuleID: "m", Body: []byte(`{"fw":"0.9"}`)}, t0)
		}
	}
	do(t, e, &Request{Op: OpUpdateTwin, DeviceID: "dev007", Body: []byte(`{"properties":{"desired":{"mode":{"eco":true}}}}`)}, t0)
	do(t, e, &Request{Op: OpUpdateTwin, DeviceID: "dev008", Body: []byte(`{"properties":{"desired":{"mode":"eco"}}}`)}, t0)

	fast := []string{
		"SELECT COUNT() FROM devices",
		"SELECT COUNT() FROM devices.modules",
		"SELECT COUNT() AS n FROM devices WHERE tags.region = 'us'",
		"SELECT COUNT() FROM devices WHERE tags.region = 0",
		"SELECT COUNT() FROM devices WHERE tags.region = true",
		"SELECT COUNT() FROM devices WHERE tags.region IN ['eu', 'apac', 3, 'eu']",
		"SELECT COUNT() FROM devices WHERE tags.site.b = 1",
		"SELECT COUNT() FROM devices WHERE tags.nothing = 'x'",
		"SELECT COUNT() FROM devices WHERE properties.reported.fw = '1.1'",
		"SELECT COUNT() FROM devices.modules WHERE properties.reported.fw = '0.9'",
		"SELECT COUNT() FROM devices WHERE connectionState = 'Connected'",
		"SELECT COUNT() FROM devices WHERE tags.floor > 1",
		"SELECT COUNT() FROM devices WHERE tags.region <= 'eu'",
		"SELECT COUNT() FROM devices WHERE tags.region < 1",
		"SELECT COUNT() FROM devices WHERE properties.reported.fw >= '1.1'",
		"SELECT COUNT() FROM devices WHERE tags.site < 5",
		"SELECT tags.region, COUNT() FROM devices GROUP BY tags.region",
		"SELECT tags.floor, COUNT() FROM devices GROUP BY tags.floor",
		"SELECT tags.site.b, COUNT() FROM devices GROUP BY tags.site.b",
		"SELECT status, COUNT() FROM devices GROUP BY status",
		"SELECT connectionState, COUNT() FROM devices GROUP BY connectionState",
		"SELECT connectionState, COUNT() FROM devices.modules GROUP BY connectionState",
		"SELECT properties.reported.fw, COUNT() FROM devices GROUP BY properties.reported.fw",
		"SELECT properties.reported.fw, COUNT() FROM devices.modules GROUP BY properties.reported.fw",
	}
	scanned := []string{
		"SELECT tags.site, COUNT() FROM devices GROUP BY tags.site",                             // objects
		"SELECT properties.desired.mode, COUNT() FROM devices GROUP BY properties.desired.mode", // an object on one twin
		"SELECT properties.reported.b, COUNT() FROM devices GROUP BY properties.reported.b",     // not indexed
		"SELECT COUNT() FROM devices WHERE tags.region = 'us' AND tags.floor = 1",               // two terms
		"SELECT COUNT() FROM devices WHERE tags.floor > 1 AND tags.region = 'us'",               // a range and a term
		"SELECT tags.floor, COUNT() FROM devices WHERE tags.region = 'eu' GROUP BY tags.floor",  // WHERE and GROUP BY
		"SELECT COUNT() FROM devices WHERE properties.reported.b = 3",                           // not indexed
	}
	check := func(round int) {
		for _, list := range [][]string{fast, scanned} {
			for _, qs := range list {
				q, err := ParseQuery(qs)
				if err != nil {
					t.Fatal(err)
				}
				e.mu.RLock()
				_, ok := e.countLocked(q)
				e.mu.RUnlock()
				if want := &list[0] == &fast[0]; ok != want {
					t.Fatalf("%s: answered from the index: %v, want %v", qs, ok, want)
				}
				ref := map[string]*int64{}
				for _, r := range e.recs {
					if r.isModule() != q.Modules || (q.Where != nil && eval(q.Where, r) != triTrue) {
						continue
					}
					var gk []byte
					if q.GroupBy != nil {
						if v, ok := fieldValue(r, q.GroupBy); ok {
							gk = appendValue(nil, &v)
						}
					}
					if ref[string(gk)] == nil {
						ref[string(gk)] = new(int64)
					}
					*ref[string(gk)]++
				}
				_, rep, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte(qs)})
				if rep.Err != nil {
					t.Fatal(rep.Err)
				}
				if want := appendGroups(nil, ref); !bytes.Equal(rep.Body, want) {
					t.Errorf("round %d: %s:\n got %s\nwant %s", round, qs, rep.Body, want)
				}
			}
		}
	}
	check(0)
	for round := 1; round <= 3; round++ {
		for i := 0; i < 300; i += 1 + rng.IntN(3) {
			write(i)
		}
		if round == 2 { // deletions take twins out of every posting
			for i := 0; i < 300; i += 17 {
				do(t, e, &Request{Op: OpDeleteDevice, DeviceID: fmt.Sprintf("dev%03d", i)}, t0)
			}
		}
		check(round)
	}
}

// A device holds up to 50 modules by default; the 51st is refused with
// 403 naming the rule, and a module of another device still fits.
func TestTwinDefaultModuleLimit(t *testing.T) {
	e := mustEngine(t, Options{})
	newDevice(t, e, "gw")
	newDevice(t, e, "other")
	for i := 0; i < DefaultMaxModulesPerDevice; i++ {
		if rep := do(t, e, &Request{Op: OpPutModule, DeviceID: "gw", ModuleID: fmt.Sprintf("m%02d", i)}, t0); rep.Err != nil {
			t.Fatalf("module %d: %v", i, rep.Err)
		}
	}
	rep := do(t, e, &Request{Op: OpPutModule, DeviceID: "gw", ModuleID: "one-more"}, t0)
	if rep.Status != 403 || rep.Err == nil || !strings.Contains(rep.Err.Msg, "module quota") {
		t.Fatalf("module 51: %d %v", rep.Status, rep.Err)
	}
	if rep := do(t, e, &Request{Op: OpPutModule, DeviceID: "other", ModuleID: "m"}, t0); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	_, page, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte("SELECT COUNT() FROM devices.modules WHERE deviceId = 'gw'")})
	if string(page.Body) != "[[null,50]]" {
		t.Fatalf("modules of gw: %s", page.Body)
	}
}
