package conf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfDefaultsValidate(t *testing.T) {
	f := Default()
	if err := f.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if f.Store.SegmentSize != 1<<30 || f.Store.CQEntriesPerFile != 300000 || f.Store.MaxMessageSize != 4<<20 {
		t.Fatalf("store defaults changed: %+v", f.Store)
	}
	if f.Registry.Listen != "0.0.0.0:9876" || f.Registry.BrokerExpiry.D() != 120*time.Second {
		t.Fatalf("registry defaults changed: %+v", f.Registry)
	}
}

// The standalone example lists every key with its default: loading it must
// give exactly Default(), so the file and the code cannot drift apart.
func TestConfStandaloneExampleIsTheDefaults(t *testing.T) {
	f, err := Load(filepath.Join("standalone.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, Default()) {
		t.Fatalf("conf/standalone.toml differs from Default():\n file: %+v\n code: %+v", f, Default())
	}
}

func TestConfExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil || len(files) < 5 {
		t.Fatalf("want the example files in conf/, got %v (%v)", files, err)
	}
	for _, p := range files {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	f, err := Load("bridge.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{{Filter: "devices/+/telemetry", Topic: "TELEMETRY"}, {Filter: "devices/#", Topic: "DEVICES"}}
	if !reflect.DeepEqual(f.Bridge.Routes, want) {
		t.Fatalf("routes = %+v, want %+v", f.Bridge.Routes, want)
	}
	s, err := Load("broker-a-s.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Broker.Role != "slave" || s.Broker.ID != 1 || len(s.Broker.Registries) != 2 {
		t.Fatalf("slave example: %+v", s.Broker)
	}
}

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfBadInputNamesFileKeyAndRange(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "[store]\nsegmnt_size = 5\n", []string{"bad.toml", "unknown key", "store.segmnt_size", "known in [store]:", "store.segment_size"}},
		{"unknown section", "[stor]\nroot = \"x\"\n", []string{"bad.toml", "unknown key", "stor", "known sections:", "[store]", "[iothub]"}},
		{"wrong type", "[store]\ncq_entries_per_file = \"many\"\n", []string{"bad.toml", "cq_entries_per_file"}},
		{"out of range", "[store]\ndisk_full_ratio = 150\n", []string{"bad.toml", "store.disk_full_ratio = 150", "between 10 and 99"}},
		{"bad size", "[store]\nsegment_size = \"12 parsecs\"\n", []string{"bad.toml", "segment_size", "invalid size"}},
		{"size range", "[store]\nsegment_size = \"1KiB\"\n", []string{"store.segment_size", "between 4KiB and 16GiB"}},
		{"bad duration", "[store]\nflush_interval = \"soon\"\n", []string{"flush_interval", "invalid duration"}},
		{"bad enum", "[store]\nflush = \"sometimes\"\n", []string{"store.flush", "one of async, sync"}},
		{"bad write mode", "[store]\nasync_writes = \"lazily\"\n", []string{"store.async_writes", "one of hybrid, mapped, pwrite"}},
		{"bad addr", "[registry]\nlisten = \"nine-eight-seven-six\"\n", []string{"registry.listen", "host:port"}},
		{"slave id", "[broker]\nrole = \"slave\"\n", []string{"broker.id", "slave"}},
		{"master id", "[broker]\nid = 3\n", []string{"broker.id", "master must have id 0"}},
		{"delay levels", "[broker]\ndelay_levels = \"1s 5x\"\n", []string{"broker.delay_levels", "5x"}},
		{"delete when", "[store]\ndelete_when = \"25\"\n", []string{"store.delete_when", "00 and 23"}},
		{"route filter", "[[bridge.route]]\nfilter = \"a/#/b\"\ntopic = \"T\"\n", []string{"bridge.route[0].filter", "'#'"}},
		{"open files", "[store]\nmax_open_files = 2\n", []string{"bad.toml", "store.max_open_files = 2", "between 8 and"}},
		{"poll linger", "[bridge]\npoll_linger = \"5ms\"\n", []string{"bad.toml", "bridge.poll_linger", "5ms"}},
		{"inbound memory", "[bridge]\nmax_inbound_memory = \"64KiB\"\n", []string{"bad.toml", "bridge.max_inbound_memory"}},
		{"inbound stall", "[bridge]\ninbound_stall_timeout = \"1ms\"\n", []string{"bad.toml", "bridge.inbound_stall_timeout"}},
		{"cluster name", "[broker]\ncluster = \"" + strings.Repeat("c", 128) + "\"\n", []string{"bad.toml", "broker.cluster", "1-127 characters", "_REPLY_TOPIC"}},
		{"amqp listen", "[amqp]\nlisten = \"5672\"\n", []string{"bad.toml", "amqp.listen", "host:port"}},
		{"amqp no vhost", "[amqp]\nvhosts = []\n", []string{"bad.toml", "amqp.vhosts", "at least one"}},
		{"amqp vhost twice", "[amqp]\nvhosts = [\"/\", \"/\"]\n", []string{"amqp.vhosts", "listed twice"}},
		{"amqp channel max", "[amqp]\nchannel_max = 70000\n", []string{"amqp.channel_max = 70000", "between 1 and 65535"}},
		{"amqp frame max", "[amqp]\nframe_max = \"1KiB\"\n", []string{"amqp.frame_max", "between 4KiB"}},
		{"amqp heartbeat", "[amqp]\nheartbeat = \"1500ms\"\n", []string{"amqp.heartbeat", "whole seconds"}},
		{"amqp message size", "[amqp]\nmax_message_size = \"1GiB\"\n", []string{"amqp.max_message_size", "512MiB"}},
		{"read coalesce", "[broker]\nread_coalesce = \"1s\"\n", []string{"bad.toml", "broker.read_coalesce", "between 0s and 100ms"}},
		{"negative read coalesce", "[broker]\nread_coalesce = \"-1ms\"\n", []string{"broker.read_coalesce", "between 0s and 100ms"}},
		{"read buffer too small", "[broker]\nread_buffer = \"1KiB\"\n", []string{"bad.toml", "broker.read_buffer", "between 4KiB and 1GiB"}},
		{"read buffer too large", "[broker]\nread_buffer = \"2GiB\"\n", []string{"broker.read_buffer", "between 4KiB and 1GiB"}},
		{"refresh age", "[bridge]\nrefresh_age = \"10s\"\n", []string{"bad.toml", "bridge.refresh_age", "between 1m0s"}},
		{"syntax", "[store\n", []string{"bad.toml", "line 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConf(t, c.text))
			if err == nil {
				t.Fatal("expected an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.toml"))
	if err == nil || !strings.Contains(err.Error(), "none.toml") {
		t.Fatalf("want an error naming the file, got %v", err)
	}
}

func TestConfListsReplaceDefaults(t *testing.T) {
	f, err := Parse("x.toml", "[broker]\nregistries = [\"10.0.0.1:9876\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Broker.Registries, []string{"10.0.0.1:9876"}) {
		t.Fatalf("registries = %v", f.Broker.Registries)
	}
	if !reflect.DeepEqual(f.Bridge.Registries, []string{"127.0.0.1:9876"}) {
		t.Fatalf("bridge registries lost their default: %v", f.Bridge.Registries)
	}
}

func TestConfSetOverrides(t *testing.T) {
	f, err := Parse("x.toml", "[store]\nflush = \"sync\"\nsegment_size = \"64MiB\"\n")
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]string{
		"store.flush":              "async",
		"store.segment_size":       "128MiB",
		"store.flush_interval":     "250ms",
		"broker.registries":        "127.0.0.1:9876, 127.0.0.1:9877",
		"broker.auto_create_topic": "false",
		"broker.id":                "0",
	}
	for k, v := range sets {
		if err := f.Set(k, v); err != nil {
			t.Fatalf("Set(%s): %v", k, err)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.Store.Flush != "async" || f.Store.SegmentSize != 128<<20 || f.Store.FlushInterval.D() != 250*time.Millisecond ||
		f.Broker.AutoCreateTopic || len(f.Broker.Registries) != 2 {
		t.Fatalf("overrides not applied: %+v %+v", f.Store, f.Broker)
	}
	for _, bad := range []struct{ k, v, want string }{
		{"store.nope", "1", "unknown key"},
		{"nope.root", "x", "unknown section"},
		{"root", "x", "not a key"},
		{"store.cq_entries_per_file", "lots", "integer"},
		{"broker.long_polling", "maybe", "true or false"},
		{"bridge.route", "x", "config file"},
	} {
		if err := f.Set(bad.k, bad.v); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Set(%s=%s) = %v, want error containing %q", bad.k, bad.v, err, bad.want)
		}
	}
}

func TestConfSizeAndDuration(t *testing.T) {
	for in, want := range map[string]Size{"0": 0, "65536": 65536, "64KiB": 64 << 10, "4MiB": 4 << 20, "1GiB": 1 << 30, "2g": 2 << 30, "10 MB": 10 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5GiB", "GiB", "99999999999GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := Size(1 << 30).String(); s != "1GiB" {
		t.Errorf("String = %s", s)
	}
	levels, err := ParseDelayLevels(Default().Broker.DelayLevels)
	if err != nil || len(levels) != 18 || levels[0] != time.Second || levels[17] != 2*time.Hour {
		t.Fatalf("delay levels = %v, %v", levels, err)
	}
	hours, err := ParseDeleteWhen("04;16")
	if err != nil || !reflect.DeepEqual(hours, []int{4, 16}) {
		t.Fatalf("delete_when = %v, %v", hours, err)
	}
}

func TestConfKeys(t *testing.T) {
	keys := Keys("store")
	if len(keys) != 25 || keys[0] != "store.async_writes" {
		t.Fatalf("Keys(store) = %v", keys)
	}
	for _, k := range Keys("bridge") {
		if k == "bridge.route" {
			t.Fatal("tables are not settable keys")
		}
	}
}

// Every list key takes a,b and TOML's ["a","b"] from the command line,
// with the same result.
func TestConfSetListSyntaxes(t *testing.T) {
	var listKeys []string
	ft := reflect.TypeOf(File{})
	for i := 0; i < ft.NumField(); i++ {
		section := ft.Field(i).Tag.Get("toml")
		st := ft.Field(i).Type
		if st.Kind() != reflect.Struct {
			continue
		}
		for j := 0; j < st.NumField(); j++ {
			if f := st.Field(j); f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String {
				listKeys = append(listKeys, section+"."+f.Tag.Get("toml"))
			}
		}
	}
	if len(listKeys) < 2 {
		t.Fatalf("found only %v", listKeys)
	}
	get := func(f *File, key string) []string {
		section, name, _ := strings.Cut(key, ".")
		sv, _ := fieldByTag(reflect.ValueOf(f).Elem(), section)
		fv, _ := fieldByTag(sv, name)
		return fv.Interface().([]string)
	}
	for _, key := range listKeys {
		for _, text := range []string{`a:1,b:2`, ` a:1 , b:2 `, `["a:1","b:2"]`, `[ "a:1", 'b:2' ]`, `["a:1",
"b:2",]`} {
			f := Default()
			if err := f.Set(key, text); err != nil {
				t.Errorf("Set(%s, %q): %v", key, text, err)
				continue
			}
			if got := get(&f, key); !slices.Equal(got, []string{"a:1", "b:2"}) {
				t.Errorf("Set(%s, %q) = %q", key, text, got)
			}
		}
		for _, empty := range []string{``, `[]`} {
			f := Default()
			if err := f.Set(key, empty); err != nil || len(get(&f, key)) != 0 {
				t.Errorf("Set(%s, %q) = %q, %v", key, empty, get(&f, key), err)
			}
		}
		for _, bad := range []string{`["a", 1]`, `["a"`, `[a, b]`} {
			f := Default()
			if err := f.Set(key, bad); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "TOML array") {
				t.Errorf("Set(%s, %q) = %v, want an error naming the key and the syntax", key, bad, err)
			}
		}
	}
}
