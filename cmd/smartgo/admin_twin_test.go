package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every device and twin admin command, against a live in-process
// cluster whose broker hosts twins; mistakes exit 2 (usage) or 1 (the
// operation's error, named).
func TestCmdAdminDevicesAndTwins(t *testing.T) {
	_, run := twinAdmin(t)
	out, _ := run(exitOK, "device", "create", "-d", "pump-17")
	if !strings.Contains(out, "pump-17") || !strings.Contains(out, "enabled") || !strings.Contains(out, "sas") {
		t.Fatalf("create: %q", out)
	}
	_, errOut := run(exitFailure, "device", "create", "-d", "pump-17")
	if !strings.Contains(errOut, "already exists") {
		t.Fatalf("duplicate create: %q", errOut)
	}
	run(exitOK, "device", "create", "-d", "cam-3", "-auth", "selfSigned", "-thumbprint", strings.Repeat("ab", 20))
	run(exitOK, "device", "create", "-d", "pump-17", "-m", "sensor")
	out, _ = run(exitOK, "-o", "json", "device", "get", "-d", "pump-17")
	var dev struct {
		DeviceID       string `json:"deviceId"`
		Authentication struct {
			SymmetricKey struct {
				PrimaryKey string `json:"primaryKey"`
			} `json:"symmetricKey"`
		} `json:"authentication"`
	}
	if err := json.Unmarshal([]byte(out), &dev); err != nil || dev.DeviceID != "pump-17" || dev.Authentication.SymmetricKey.PrimaryKey == "" {
		t.Fatalf("get json: %v %q", err, out)
	}
	if out, _ = run(exitOK, "device", "update", "-d", "cam-3", "-status", "disabled", "-reason", "stolen"); !strings.Contains(out, "disabled") {
		t.Fatalf("update: %q", out)
	}
	if out, _ = run(exitOK, "device", "list", "-limit", "1"); !strings.Contains(out, "-continuation") {
		t.Fatalf("list page: %q", out)
	}
	if out, _ = run(exitOK, "device", "list"); !strings.Contains(out, "cam-3") || !strings.Contains(out, "pump-17") {
		t.Fatalf("list: %q", out)
	}
	// Never active: "-" as every other time column, not year 1.
	if !regexp.MustCompile(`(?m)^pump-17 +enabled +Disconnected +- `).MatchString(out) || strings.Contains(out, "0001-01-01") {
		t.Fatalf("list: a device never active: %q", out)
	}
	if out, _ = run(exitOK, "device", "list", "-d", "pump-17"); !strings.Contains(out, "sensor") {
		t.Fatalf("list modules: %q", out)
	}

	out, _ = run(exitOK, "twin", "update", "-d", "pump-17", "-desired", `{"rpm":1200}`, "-tags", `{"site":"north"}`)
	if !strings.Contains(out, `{"rpm":1200,"$version":2}`) || !strings.Contains(out, `{"site":"north"}`) || !strings.Contains(out, "AAAAAAAAAAI=") {
		t.Fatalf("twin update: %q", out)
	}
	_, errOut = run(exitFailure, "twin", "update", "-d", "pump-17", "-tags", `{"x":1}`, "-if-match", "AAAAAAAAAAE=")
	if !strings.Contains(errOut, "PreconditionFailed") {
		t.Fatalf("stale etag: %q", errOut)
	}
	_, errOut = run(exitFailure, "twin", "update", "-d", "pump-17", "-desired", `{"a.b":1}`)
	if !strings.Contains(errOut, "key rules") {
		t.Fatalf("bad key: %q", errOut)
	}
	patch := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(patch, []byte(`{"tags":{"floor":3}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(exitOK, "twin", "update", "-d", "pump-17", "-patch", "@"+patch, "-if-match", "*")
	out, _ = run(exitOK, "-o", "json", "twin", "get", "-d", "pump-17")
	var twin struct {
		Tags map[string]any `json:"tags"`
	}
	if err := json.Unmarshal([]byte(out), &twin); err != nil || twin.Tags["floor"] != 3.0 || twin.Tags["site"] != "north" || !strings.Contains(out, "$metadata") {
		t.Fatalf("twin get json: %v %q", err, out)
	}
	if out, _ = run(exitOK, "twin", "get", "-d", "pump-17", "-m", "sensor"); !regexp.MustCompile(`(?m)^lastActivityTime +-$`).MatchString(out) {
		t.Fatalf("twin get: a module never active: %q", out)
	}
	out, _ = run(exitOK, "twin", "replace", "-d", "pump-17", "-doc", `{"tags":{"site":"south"}}`)
	if !strings.Contains(out, `{"site":"south"}`) || !strings.Contains(out, `{"$version":3}`) {
		t.Fatalf("replace: %q", out)
	}
	out, _ = run(exitOK, "twin", "query", "-q", "SELECT * FROM devices WHERE tags.site = 'south'")
	if !strings.Contains(out, "pump-17") || strings.Contains(out, "cam-3") {
		t.Fatalf("query: %q", out)
	}
	out, _ = run(exitOK, "twin", "query", "-q", "SELECT status, COUNT() AS n FROM devices GROUP BY status")
	if !strings.Contains(out, "STATUS") || !strings.Contains(out, "disabled") {
		t.Fatalf("count: %q", out)
	}
	out, _ = run(exitOK, "-o", "json", "twin", "query", "-all", "-limit", "1", "-q", "SELECT deviceId FROM devices")
	var page struct {
		Items        []map[string]string `json:"items"`
		Continuation string              `json:"continuation"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 2 || page.Continuation != "" {
		t.Fatalf("query -all: %v %q", err, out)
	}
	_, errOut = run(exitFailure, "twin", "query", "-q", "SELECT * FROM things")
	if !strings.Contains(errOut, "InvalidQuery") {
		t.Fatalf("bad query: %q", errOut)
	}
	run(exitUsage, "twin", "update", "-d", "pump-17")
	run(exitUsage, "twin", "update", "-d", "pump-17", "-tags", "{bad")
	run(exitUsage, "device", "get")
	run(exitUsage, "twin", "query", "-q", "SELECT * FROM devices", "-limit", "0")

	run(exitOK, "device", "delete", "-d", "pump-17", "-m", "sensor")
	if out, _ = run(exitOK, "device", "delete", "-d", "pump-17"); !strings.Contains(out, "pump-17 deleted") {
		t.Fatalf("delete: %q", out)
	}
	if _, errOut = run(exitFailure, "twin", "get", "-d", "pump-17"); !strings.Contains(errOut, "DeviceNotFound") {
		t.Fatalf("get after delete: %q", errOut)
	}
}
