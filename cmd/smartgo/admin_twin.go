package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	twc "github.com/smartgo/smartgo/client/twin"
)

// The identity registry and twins: `smartgo admin device ...` and
// `smartgo admin twin ...`, through the Go twin API (client/twin).

func twinClient(e *adminEnv) (*twc.Client, error) {
	// A device created through it gets a session holding its
	// cloud-to-device messages on an IoT hub, as with the HTTPS API
	// (twc.Options.PrepareC2D); a failure to prepare is a warning.
	c, err := twc.New(twc.Options{Registries: e.registries, PrepareC2D: func(ctx context.Context, id string) error {
		if _, err := e.a.PrepareC2D(ctx, id); err != nil {
			fmt.Fprintf(e.stderr, "warning: no session prepared for %s's cloud-to-device messages: %v\n", id, err)
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	e.onClose = append(e.onClose, func() { _ = c.Close() })
	return c, nil
}

// jsonArg reads a flag's JSON: the text itself, or @FILE.
func jsonArg(name, v string) ([]byte, error) {
	b := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, usagef("%s: %v", name, err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("%s is not valid JSON", name)
	}
	return b, nil
}

// rawJSON writes a document the engine returned: indented.
func (o *output) rawJSON(doc []byte) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		o.err = err
		return
	}
	_, o.err = fmt.Fprintf(o.w, "%s\n", buf.Bytes())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func authOf(a *twc.Authentication) (kind, key string) {
	if a == nil {
		return "-", "-"
	}
	switch {
	case a.SymmetricKey != nil && a.SymmetricKey.PrimaryKey != "":
		return a.Type, a.SymmetricKey.PrimaryKey
	case a.X509Thumbprint != nil && a.X509Thumbprint.PrimaryThumbprint != "":
		return a.Type, a.X509Thumbprint.PrimaryThumbprint
	}
	return a.Type, "-"
}

func (o *output) devices(v any, devs []twc.Device, next string) {
	o.table(v, []string{"DEVICE", "STATUS", "CONNECTION", "LAST ACTIVITY", "AUTH", "PRIMARY KEY/THUMBPRINT", "ETAG"}, func(add func(...any)) {
		for _, d := range devs {
			kind, key := authOf(d.Authentication)
			add(d.DeviceID, d.Status, d.ConnectionState, fmtISOTime(d.LastActivityTime), kind, key, d.Etag)
		}
		if next != "" {
			add("(more: -continuation "+next+")", "", "", "", "", "", "")
		}
	})
}

func (o *output) modules(v any, mods []twc.Module) {
	o.table(v, []string{"DEVICE", "MODULE", "MANAGED BY", "CONNECTION", "AUTH", "PRIMARY KEY/THUMBPRINT", "ETAG"}, func(add func(...any)) {
		for _, m := range mods {
			kind, key := authOf(m.Authentication)
			add(m.DeviceID, m.ModuleID, orDash(m.ManagedBy), m.ConnectionState, kind, key, m.Etag)
		}
	})
}

func init() {
	registerAdmin(adminCommand{name: "device create", synopsis: "-d DEVICE [-m MODULE] [-status S] [-auth sas|selfSigned|certificateAuthority|none] [-primary-key K] [-secondary-key K] [-thumbprint T] [-thumbprint2 T] [-edge]",
		summary: "create a device (or module) identity with its twin",
		description: "Creates a device identity, or with -m a module identity of an existing\n" +
			"device, and its twin. SAS keys not given are generated (shown in the\n" +
			"output); -thumbprint registers an X.509 certificate (selfSigned). A device\n" +
			"or module that exists is an error.",
		examples: []string{"smartgo admin device create -d pump-17",
			"smartgo admin device create -d cam-3 -auth selfSigned -thumbprint 9A2F...C41B",
			"smartgo admin device create -d gateway-1 -m sensor -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id (a module of the device)")
			status := fs.String("status", "enabled", "`status`: enabled or disabled")
			auth := fs.String("auth", "sas", "`authentication`: sas, selfSigned, certificateAuthority or none")
			pk := fs.String("primary-key", "", "primary SAS `key` (base64; generated when empty)")
			sk := fs.String("secondary-key", "", "secondary SAS `key` (base64; generated when empty)")
			t1 := fs.String("thumbprint", "", "primary X.509 `thumbprint` (hex SHA-1 or SHA-256)")
			t2 := fs.String("thumbprint2", "", "secondary X.509 `thumbprint`")
			edge := fs.Bool("edge", false, "an IoT Edge device")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				if err := oneOf("-auth", *auth, "sas", "selfSigned", "certificateAuthority", "none"); err != nil {
					return err
				}
				if err := oneOf("-status", *status, "enabled", "disabled"); err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				a := &twc.Authentication{Type: *auth}
				if *pk != "" || *sk != "" {
					a.SymmetricKey = &twc.SymmetricKey{PrimaryKey: *pk, SecondaryKey: *sk}
				}
				if *t1 != "" || *t2 != "" {
					a.X509Thumbprint = &twc.X509Thumbprint{PrimaryThumbprint: *t1, SecondaryThumbprint: *t2}
				}
				if *mod != "" {
					m, err := c.CreateModule(ctx, &twc.Module{DeviceID: *dev, ModuleID: *mod, Authentication: a})
					if err != nil {
						return err
					}
					e.out.modules(m, []twc.Module{*m})
					return nil
				}
				d, err := c.CreateDevice(ctx, &twc.Device{DeviceID: *dev, Status: *status, Authentication: a, Capabilities: &twc.Capabilities{IotEdge: *edge}})
				if err != nil {
					return err
				}
				e.out.devices(d, []twc.Device{*d}, "")
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "device get", synopsis: "-d DEVICE [-m MODULE]",
		summary:     "a device (or module) identity: status, keys, connection",
		description: "Shows a device identity (or with -m a module identity): status, SAS keys or\nthumbprints, connection state, last activity, etag.",
		examples:    []string{"smartgo admin device get -d pump-17", "smartgo admin device get -d gateway-1 -m sensor -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				if *mod != "" {
					m, err := c.GetModule(ctx, *dev, *mod)
					if err != nil {
						return err
					}
					e.out.modules(m, []twc.Module{*m})
					return nil
				}
				d, err := c.GetDevice(ctx, *dev)
				if err != nil {
					return err
				}
				e.out.devices(d, []twc.Device{*d}, "")
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "device update", synopsis: "-d DEVICE [-status enabled|disabled] [-reason TEXT] [-if-match ETAG]",
		summary:     "enable or disable a device",
		description: "Changes a device's status (a disabled device may not connect), keeping its\ncredentials. -if-match makes the change conditional on the identity etag.",
		examples:    []string{"smartgo admin device update -d pump-17 -status disabled -reason stolen"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			status := fs.String("status", "", "`status`: enabled or disabled")
			reason := fs.String("reason", "", "status `reason`")
			ifMatch := fs.String("if-match", "", "identity `etag` the update requires")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				if *status == "" && *reason == "" {
					return usagef("nothing to change: give -status (and -reason)")
				}
				if *status != "" {
					if err := oneOf("-status", *status, "enabled", "disabled"); err != nil {
						return err
					}
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				d, err := c.GetDevice(ctx, *dev)
				if err != nil {
					return err
				}
				if *status != "" {
					d.Status = *status
				}
				d.StatusReason = *reason
				etag := *ifMatch
				if etag == "" {
					etag = d.Etag // no lost update against a concurrent change
				}
				if d, err = c.UpdateDevice(ctx, d, etag); err != nil {
					return err
				}
				e.out.devices(d, []twc.Device{*d}, "")
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "device list", synopsis: "[-d DEVICE] [-limit N] [-continuation TOKEN]",
		summary:     "device identities (or a device's modules), page by page",
		description: "Lists device identities, a page at a time; when more follow, the last line\ngives the -continuation to ask for the next page. With -d, lists that\ndevice's modules.",
		examples:    []string{"smartgo admin device list", "smartgo admin device list -limit 500 -o json", "smartgo admin device list -d gateway-1"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "list this `device`'s modules")
			limit := fs.Int("limit", 100, "page `size` (1..1000)")
			cont := fs.String("continuation", "", "`token` of the page to read")
			return func(ctx context.Context, e *adminEnv) error {
				if *limit < 1 || *limit > 1000 {
					return usagef("-limit must be between 1 and 1000, not %d", *limit)
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				if *dev != "" {
					mods, err := c.ListModules(ctx, *dev)
					if err != nil {
						return err
					}
					e.out.modules(mods, mods)
					return nil
				}
				devs, next, err := c.ListDevices(ctx, *limit, *cont)
				if err != nil {
					return err
				}
				e.out.devices(map[string]any{"devices": devs, "continuation": next}, devs, next)
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "device delete", synopsis: "-d DEVICE [-m MODULE] [-if-match ETAG]",
		summary:     "delete a device (with its modules) or a module, and their twins",
		description: "Deletes a device identity with its modules and twins, or with -m one module.\n-if-match makes it conditional on the identity etag.",
		examples:    []string{"smartgo admin device delete -d pump-17", "smartgo admin device delete -d gateway-1 -m sensor"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id")
			ifMatch := fs.String("if-match", "", "identity `etag` the delete requires")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				if *mod != "" {
					err = c.DeleteModule(ctx, *dev, *mod, *ifMatch)
				} else {
					err = c.DeleteDevice(ctx, *dev, *ifMatch)
				}
				if err != nil {
					return err
				}
				name := twc.TwinKey(*dev, *mod)
				e.out.message(map[string]any{"id": name, "deleted": true}, name+" deleted")
				return nil
			}
		}})
}

// twinSummary shows a twin as FIELD VALUE rows, or the document with -o json.
func (o *output) twinSummary(doc []byte) {
	if o.json {
		o.rawJSON(doc)
		return
	}
	var t struct {
		DeviceID         string          `json:"deviceId"`
		ModuleID         string          `json:"moduleId"`
		Etag             string          `json:"etag"`
		Version          int64           `json:"version"`
		Status           string          `json:"status"`
		ConnectionState  string          `json:"connectionState"`
		LastActivityTime string          `json:"lastActivityTime"`
		Tags             json.RawMessage `json:"tags"`
		Properties       struct {
			Desired  json.RawMessage `json:"desired"`
			Reported json.RawMessage `json:"reported"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(doc, &t); err != nil {
		o.err = err
		return
	}
	// A section without its $metadata, members in name order, $version last
	// (the engine's order).
	strip := func(sec json.RawMessage) string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(sec, &m)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k == "$metadata" || k == "$version" {
				continue
			}
			name, _ := json.Marshal(k)
			fmt.Fprintf(&b, "%s:%s,", name, m[k])
		}
		fmt.Fprintf(&b, `"$version":%s}`, m["$version"])
		return b.String()
	}
	o.table(nil, []string{"FIELD", "VALUE"}, func(add func(...any)) {
		add("deviceId", t.DeviceID)
		if t.ModuleID != "" {
			add("moduleId", t.ModuleID)
		}
		add("etag", t.Etag)
		add("version", t.Version)
		add("status", t.Status)
		add("connectionState", t.ConnectionState)
		add("lastActivityTime", fmtISOTime(t.LastActivityTime))
		add("tags", string(t.Tags))
		add("desired", strip(t.Properties.Desired))
		add("reported", strip(t.Properties.Reported))
	})
}

func init() {
	registerAdmin(adminCommand{name: "twin get", synopsis: "-d DEVICE [-m MODULE]",
		summary:     "a device's (or module's) twin",
		description: "Shows a twin: its identity fields, tags, desired and reported properties\n(with -o json the whole document, $metadata included).",
		examples:    []string{"smartgo admin twin get -d pump-17", "smartgo admin twin get -d gateway-1 -m sensor -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				t, err := c.GetTwin(ctx, *dev, *mod)
				if err != nil {
					return err
				}
				e.out.twinSummary(t.JSON)
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "twin update", synopsis: "-d DEVICE [-m MODULE] (-tags JSON | -desired JSON | -patch JSON) [-if-match ETAG]",
		summary: "merge a patch into a twin's tags and desired properties",
		description: "Merges a patch into the twin: -tags and -desired are the sections\n" +
			"themselves, -patch a twin document with \"tags\" and \"properties\":\n" +
			"{\"desired\": ...}. Members set to null are removed. A JSON argument may be\n" +
			"@FILE. -if-match (the twin etag, or *) makes the update conditional;\n" +
			"connected devices are sent the desired part.",
		examples: []string{`smartgo admin twin update -d pump-17 -desired '{"rpm":1200}'`,
			`smartgo admin twin update -d pump-17 -tags '{"site":"north","retired":null}' -if-match AAAAAAAAAAc=`,
			"smartgo admin twin update -d pump-17 -patch @patch.json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id")
			tags := fs.String("tags", "", "tags patch (`JSON` or @FILE)")
			desired := fs.String("desired", "", "desired properties patch (`JSON` or @FILE)")
			patch := fs.String("patch", "", "twin patch (`JSON` or @FILE)")
			ifMatch := fs.String("if-match", "", "twin `etag` the update requires (* = any)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				body, err := twinPatchArg(*tags, *desired, *patch)
				if err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				t, err := c.UpdateTwin(ctx, *dev, *mod, body, *ifMatch)
				if err != nil {
					return err
				}
				e.out.twinSummary(t.JSON)
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "twin replace", synopsis: "-d DEVICE [-m MODULE] -doc JSON [-if-match ETAG]",
		summary: "replace a twin's tags and desired properties",
		description: "Replaces the twin's tags and desired properties with those of -doc (a twin\n" +
			"document; a section it leaves out becomes empty). -doc may be @FILE.",
		examples: []string{`smartgo admin twin replace -d pump-17 -doc '{"tags":{"site":"south"},"properties":{"desired":{}}}'`},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			mod := fs.String("m", "", "`module` id")
			doc := fs.String("doc", "", "twin document (`JSON` or @FILE)")
			ifMatch := fs.String("if-match", "", "twin `etag` the replace requires (* = any)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				if err := required(*doc, "-doc"); err != nil {
					return err
				}
				body, err := jsonArg("-doc", *doc)
				if err != nil {
					return err
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				t, err := c.ReplaceTwin(ctx, *dev, *mod, body, *ifMatch)
				if err != nil {
					return err
				}
				e.out.twinSummary(t.JSON)
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "twin query", synopsis: "-q QUERY [-limit N] [-continuation TOKEN] [-all]",
		summary: "query twins (SELECT ... FROM devices [WHERE ...])",
		description: "Runs a twin query (the language of docs/twins.md) and shows a page of\n" +
			"results; when more follow, the last line gives the -continuation for the\n" +
			"next page. -all reads every page.",
		examples: []string{`smartgo admin twin query -q "SELECT * FROM devices WHERE tags.site = 'north'"`,
			`smartgo admin twin query -q "SELECT properties.reported.fw AS fw, COUNT() AS n FROM devices GROUP BY properties.reported.fw"`,
			`smartgo admin twin query -all -o json -q "SELECT deviceId FROM devices WHERE connectionState = 'Connected'"`},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			q := fs.String("q", "", "the `query`")
			limit := fs.Int("limit", 100, "page `size` (1..1000)")
			cont := fs.String("continuation", "", "`token` of the page to read")
			all := fs.Bool("all", false, "read every page")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*q, "-q"); err != nil {
					return err
				}
				if *limit < 1 || *limit > 1000 {
					return usagef("-limit must be between 1 and 1000, not %d", *limit)
				}
				c, err := twinClient(e)
				if err != nil {
					return err
				}
				var items []json.RawMessage
				next := *cont
				for {
					page, err := c.Query(ctx, *q, twc.QueryOptions{PageSize: *limit, Continuation: next})
					if err != nil {
						return err
					}
					items, next = append(items, page.Items...), page.Continuation
					if !*all || next == "" {
						break
					}
				}
				e.out.queryItems(items, next)
				return nil
			}
		}})
}

// twinPatchArg builds the twin patch of twin update's flags.
func twinPatchArg(tags, desired, patch string) ([]byte, error) {
	n := 0
	for _, v := range []string{tags, desired, patch} {
		if v != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, usagef("one of -tags, -desired or -patch is required")
	case patch != "" && n > 1:
		return nil, usagef("-patch goes alone (it holds tags and desired itself)")
	case patch != "":
		return jsonArg("-patch", patch)
	}
	doc := map[string]json.RawMessage{}
	if tags != "" {
		b, err := jsonArg("-tags", tags)
		if err != nil {
			return nil, err
		}
		doc["tags"] = b
	}
	if desired != "" {
		b, err := jsonArg("-desired", desired)
		if err != nil {
			return nil, err
		}
		doc["properties"] = json.RawMessage(`{"desired":` + string(b) + `}`)
	}
	return json.Marshal(doc)
}

// queryItems shows query results: twins as DEVICE/MODULE/STATUS/... rows,
// other items with a column per member; with -o json, the items and the
// continuation.
func (o *output) queryItems(items []json.RawMessage, next string) {
	v := map[string]any{"items": items, "continuation": next}
	rows := make([]map[string]json.RawMessage, 0, len(items))
	var cols []string
	twins := true
	for _, it := range items {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(it, &m); err != nil {
			o.err = err
			return
		}
		if _, ok := m["properties"]; !ok {
			twins = false
		}
		for k := range m {
			if !slices.Contains(cols, k) {
				cols = append(cols, k)
			}
		}
		rows = append(rows, m)
	}
	if twins && len(rows) > 0 {
		cols = []string{"deviceId", "moduleId", "status", "connectionState", "version", "tags"}
	} else {
		slices.Sort(cols)
	}
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(c)
	}
	o.table(v, header, func(add func(...any)) {
		for _, m := range rows {
			cells := make([]any, len(cols))
			for i, c := range cols {
				cell := "-"
				if raw, ok := m[c]; ok {
					var s string
					if json.Unmarshal(raw, &s) == nil {
						cell = s
					} else {
						cell = string(raw)
					}
				}
				cells[i] = cell
			}
			add(cells...)
		}
		if next != "" {
			more := make([]any, len(cols))
			for i := range more {
				more[i] = ""
			}
			more[0] = "(more: -continuation " + next + ")"
			add(more...)
		}
	})
}
