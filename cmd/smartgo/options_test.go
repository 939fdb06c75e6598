package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// allOptions is every package Options the binary builds from the
// configuration file.
type allOptions struct {
	Registry   registry.Options
	Broker     broker.Options // with Store, Remoting and HA inside
	StateStore broker.StateStoreOptions
	Twin       broker.TwinOptions
	MQTT       mqtt.Options
	Bridge     bridge.Options
	Front      bridge.StateStoreFrontOptions
	Controller controller.Options
	IoTHub     iothub.Options
	AMQP       amqp.Options
}

// fromConf maps f the way the subcommands do.
func fromConf(t *testing.T, f conf.File) allOptions {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	var o allOptions
	var err error
	o.Registry = registryOptions(f.Registry)
	if o.Broker, err = brokerOptions(f, log); err != nil {
		t.Fatalf("brokerOptions: %v", err)
	}
	o.StateStore = stateStoreOptions(f.StateStore)
	o.Twin = twinOptions(f.Twin)
	o.MQTT, o.Bridge = bridgeOptions(f.Bridge, log)
	o.Front = frontOptions(f.Bridge, f.StateStore)
	if o.Controller, err = controllerOptions(f.Controller, nil, log); err != nil {
		t.Fatalf("controllerOptions: %v", err)
	}
	o.IoTHub = iothubOptions(f.IoTHub, f.Bridge, log)
	o.AMQP = amqpOptions(f.AMQP, log)
	return o
}

// packageDefaults is what each package takes by default.
func packageDefaults(f conf.File) allOptions {
	mo := mqtt.DefaultOptions()
	mo.ReservedFilters = mqtt.DefaultReservedFilters
	return allOptions{
		Registry:   registry.DefaultOptions(),
		Broker:     broker.DefaultOptions(f.Store.Root),
		StateStore: broker.DefaultStateStoreOptions(),
		Twin:       broker.DefaultTwinOptions(),
		MQTT:       mo,
		Bridge:     bridge.DefaultOptions(f.Bridge.Registries...),
		Front: bridge.StateStoreFrontOptions{Router: router.DefaultOptions(f.Bridge.Registries...),
			DropTimeout: bridge.DefaultDropTimeout},
		Controller: controller.DefaultOptions(f.Controller.DataDir),
		IoTHub:     iothub.DefaultOptions(f.Bridge.Registries...),
		AMQP:       amqp.DefaultOptions(),
	}
}

// notFromTOML lists the option fields the configuration file does not
// set, each with the reason. Everything else must be reachable from TOML.
var notFromTOML = map[string]string{
	"Broker.Logger": "injected", "Broker.Now": "injected (tests)", "Broker.Store.Logger": "injected",
	"Broker.Store.Now": "injected (tests)", "Broker.Store.DiskUsage": "injected (tests)",
	"Broker.Store.Listener": "wired by the broker", "Broker.Store.TagsCode": "wired by the broker (delay levels)",
	"Broker.Store.Consumed": "wired by the broker (consumer offsets)", "Broker.Store.Retain": "wired by the broker (Broker.Retained)", "Broker.Store.PutTally": "wired by the broker (its send counters)",
	"Broker.Store.FS":             "injected (tests: fault injection)",
	"Broker.Store.StoreHost":      "derived from broker.advertise_ip and broker.listen",
	"Broker.Remoting.Addr":        "taken from broker.listen",
	"Broker.Remoting.Logger":      "injected",
	"Broker.HA.BrokerName":        "broker.name",
	"Broker.HA.BrokerAddr":        "the broker's advertised address",
	"Broker.HA.Logger":            "injected",
	"Broker.HA.Controlled":        "set by the broker when a controller elects its master",
	"Broker.HA.BrokerID":          "broker.id, set by the broker in controlled mode",
	"Broker.HA.Epoch":             "the controller's",
	"Broker.HA.OnTruncate":        "wired by the broker",
	"Broker.HA.OnConnected":       "wired by the broker",
	"Broker.Registries":           "where to register is the deployment's: no package default",
	"Broker.ProtectedTopics":      "the [bridge] section's topics (sessions, retained, default, egress, routes)",
	"Broker.Retained":             "the AMQP backend's durable queues and definitions, always",
	"Registry.Logger":             "injected",
	"StateStore.Logger":           "injected",
	"Twin.Logger":                 "injected",
	"Twin.Engine.Rand":            "tests (fixed keys)",
	"MQTT.Version":                "the binary's version and commit (main.version, main.commit), for $SYS/broker/version",
	"MQTT.TLSConfig":              "tests; files come from bridge.tls_cert/tls_key",
	"MQTT.ReservedFilters":        "the program's own topics, not an operator's choice",
	"MQTT.Reserved":               "wired by the program",
	"MQTT.Authenticate":           "wired by the program (the IoT hub front)",
	"MQTT.OnConnect":              "wired by the program (the IoT hub front)",
	"MQTT.OnDisconnect":           "wired by the program (the IoT hub front)",
	"MQTT.OnAcked":                "wired by the program (the IoT hub front)",
	"MQTT.Authorize":              "wired by the program (the IoT hub front)",
	"Bridge.IngressProps":         "wired by the program (the IoT hub front)",
	"MQTT.Logger":                 "injected",
	"Bridge.WrapBackend":          "wired by cmd (state store session hook)",
	"Bridge.PrepareC2D":           "wired by the IoT hub (admin device send)",
	"Bridge.Logger":               "injected",
	"Bridge.Version":              "the binary's version (main.version), reported in heartbeats",
	"Front.Hook":                  "wired by cmd",
	"Front.Logger":                "injected",
	"Front.Router.Brokers":        "fixed broker tables are for tests",
	"Front.Router.Shards":         "used with fixed broker tables only",
	"Front.Router.Local":          "in-process brokers, wired by cmd",
	"Front.Router.OnNotify":       "wired by the front",
	"Front.Router.OnMasterChange": "wired by the front (watches registered again)",
	"Front.Router.Logger":         "injected",
	"Controller.Server":           "wired by cmd (registry.controller)",
	"Controller.RaftListener":     "tests",
	"Controller.Logger":           "injected",
	"IoTHub.Logger":               "injected",
	"AMQP.Backend":                "wired by cmd (bridge.AMQPBackend on bridge.registries)",
	"AMQP.Authenticate":           "wired by cmd from amqp.credentials_file",
	"AMQP.Logger":                 "injected",
	"IoTHub.TLSConfig":            "tests; files come from iothub.tls_cert/tls_key",
	"IoTHub.Twins.Registries":     "bridge.registries",
	"IoTHub.Twins.Brokers":        "fixed broker tables are for tests",
	"IoTHub.Twins.Shards":         "used with fixed broker tables only",
	"IoTHub.Twins.Local":          "in-process brokers, wired by cmd",
	"IoTHub.Twins.OnDesired":      "wired by the hub",
	"IoTHub.Twins.PrepareC2D":     "wired by the hub (its own session preparation)",
	"IoTHub.Twins.NoPrepareC2D":   "a hub always prepares the sessions of devices it creates",
	"IoTHub.Twins.Logger":         "injected",
	"IoTHub.Twins.ReplicaReads":   "the console's (stale reads while a master is down); the hub reads masters only",
}

// leaves flattens v into its leaf fields by dotted path: structs are
// walked (time and address types are leaves), everything else is a leaf.
func leaves(prefix string, v reflect.Value, out map[string]reflect.Value) {
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeOf(netip.AddrPort{}) && v.Type() != reflect.TypeOf(time.Time{}) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if prefix != "" && !f.Anonymous {
				name = prefix + "." + f.Name
			} else if prefix != "" {
				name = prefix // embedded: its fields sit at the parent's level
			}
			if f.Anonymous {
				leaves(name, v.Field(i), out)
				continue
			}
			leaves(name, v.Field(i), out)
		}
		return
	}
	out[prefix] = v
}

func leafMap(o allOptions) map[string]reflect.Value {
	m := map[string]reflect.Value{}
	leaves("", reflect.ValueOf(o), m)
	return m
}

// TestOptionsDefaultsAreThePackages: the binary with no configuration file
// runs every package with that package's own defaults, so conf.Default()
// and the DefaultOptions of each package cannot disagree.
func TestOptionsDefaultsAreThePackages(t *testing.T) {
	f := conf.Default()
	got, want := leafMap(fromConf(t, f)), leafMap(packageDefaults(f))
	if len(got) < 100 {
		t.Fatalf("only %d option fields found: is the walk broken?", len(got))
	}
	var bad []string
	for path, g := range got {
		if _, skip := notFromTOML[path]; skip {
			continue
		}
		w := want[path]
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			bad = append(bad, fmt.Sprintf("%s: conf.Default() gives %v, the package's default is %v", path, g, w))
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// perturb returns a value for key different from its default and valid
// for the package mapping, as text for conf.File.Set.
func perturb(key string, def reflect.Value) (string, bool) {
	special := map[string]string{
		"broker.role": "sync_master", "store.flush": "sync", "store.async_writes": "mapped",
		"broker.delay_levels": "1s 2s", "store.delete_when": "05", "broker.advertise_ip": "10.0.0.1",
		"log.level": "debug", "log.format": "json",
		"controller.peers":   "127.0.0.1:9878=127.0.0.1:9880",
		"iothub.device_auth": "none",
	}
	if s, ok := special[key]; ok {
		return s, true
	}
	switch d := def.Interface().(type) {
	case conf.Duration:
		if d.D() == 0 {
			return "1s", true
		}
		return (2 * d.D()).String(), true
	case conf.Size:
		return fmt.Sprint(max(d.Bytes()/2, 1024)), true
	case bool:
		return fmt.Sprint(!d), true
	case int, int64:
		return fmt.Sprint(def.Int() + 1), true
	case []string:
		return "127.0.0.2:1", true
	case string:
		switch {
		case strings.Contains(d, ":"), strings.HasSuffix(key, "listen"), strings.HasSuffix(key, "address"), strings.HasSuffix(key, "advertise"):
			return "127.0.0.2:1", true
		case d == "":
			return "x", true
		}
		return d + "2", true
	}
	return "", false
}

// TestOptionsEveryFieldFromTOML changes each key of the configuration file
// in turn and records which option fields move: every field of every
// package's Options must be moved by some key, unless notFromTOML says
// why not.
func TestOptionsEveryFieldFromTOML(t *testing.T) {
	base := conf.Default()
	before := leafMap(fromConf(t, base))
	reached := map[string][]string{}
	record := func(key string, f conf.File) {
		for path, v := range leafMap(fromConf(t, f)) {
			if !reflect.DeepEqual(v.Interface(), before[path].Interface()) {
				reached[path] = append(reached[path], key)
			}
		}
	}
	fv := reflect.ValueOf(base)
	for i := 0; i < fv.NumField(); i++ {
		section := fv.Type().Field(i).Tag.Get("toml")
		for _, key := range conf.Keys(section) {
			sv := fv.Field(i)
			var def reflect.Value
			for j := 0; j < sv.NumField(); j++ {
				if section+"."+sv.Type().Field(j).Tag.Get("toml") == key {
					def = sv.Field(j)
				}
			}
			text, ok := perturb(key, def)
			if !ok {
				t.Errorf("%s: no way to change a %s", key, def.Type())
				continue
			}
			f := conf.Default()
			if err := f.Set(key, text); err != nil {
				t.Errorf("set %s=%s: %v", key, text, err)
				continue
			}
			if key == "broker.id" {
				f.Broker.Role = "slave"
			}
			record(key, f)
		}
	}
	f := conf.Default()
	f.Bridge.Routes = []conf.Route{{Filter: "a/#", Topic: "A"}}
	record("[[bridge.route]]", f)
	f = conf.Default()
	f.IoTHub.Policies = []conf.IoTHubPolicy{{Name: "p", Key: "MDEyMzQ1Njc4OWFiY2RlZg==", Permissions: []string{"registryRead"}}}
	record("[[iothub.policy]]", f)

	var missing []string
	for path := range before {
		if _, skip := notFromTOML[path]; !skip && len(reached[path]) == 0 {
			missing = append(missing, path)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("option %s is not reachable from the configuration file (add a key to conf, or a reason to notFromTOML)", m)
	}
	for path := range notFromTOML {
		if _, ok := before[path]; !ok {
			t.Errorf("notFromTOML names %s, which is no option field", path)
		}
	}
}

// Cluster names of 1-127 characters are accepted, as before SmartGo held
// them to the 115 whose reply topic is valid: a broker configured with a
// longer one must still start after an upgrade
// (TestCmdBinaryBrokerLongClusterName); the limit for request-reply is
// the protocol's suffix and the topic rule, and conf's message says it.
// The broker's "off" values in the file reach remoting as its "off":
// read_coalesce "0s" and read_buffer "0" are negative there, since zero
// takes remoting's default.
func TestOptionsRemotingOffValues(t *testing.T) {
	f := conf.Default()
	for k, v := range map[string]string{"broker.read_coalesce": "0s", "broker.read_buffer": "0"} {
		if err := f.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	o := fromConf(t, f).Broker.Remoting
	if o.ReadCoalesce >= 0 || o.ReadBuffer >= 0 {
		t.Fatalf("read_coalesce 0s, read_buffer 0: ReadCoalesce %v, ReadBuffer %d, want both negative (off)", o.ReadCoalesce, o.ReadBuffer)
	}
	if d := fromConf(t, conf.Default()).Broker.Remoting; d.ReadBuffer != remoting.DefaultReadBuffer {
		t.Fatalf("default read_buffer: ReadBuffer %d, want %d", d.ReadBuffer, remoting.DefaultReadBuffer)
	}
}

func TestOptionsClusterNameOfOlderConfigs(t *testing.T) {
	longestReply := 0
	for n := 100; n <= 127; n++ {
		f := conf.Default()
		f.Broker.Cluster = strings.Repeat("c", n)
		if err := f.Validate(); err != nil {
			t.Fatalf("cluster name of %d: %v", n, err)
		}
		if broker.ValidateTopicName(protocol.ReplyTopic(f.Broker.Cluster)) == nil {
			longestReply = n
		}
	}
	f := conf.Default()
	f.Broker.Cluster = strings.Repeat("c", 128)
	err := f.Validate()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d for request-reply", longestReply)) {
		t.Fatalf("cluster name of 128: %v, want a refusal naming %d as request-reply's limit", err, longestReply)
	}
}
