package main

import (
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/twin"
)

// statsMetrics names, for every field of the counters structs a node
// keeps, the /metrics family that exports it. A field added to one of
// these structs without a metric fails TestCmdBinaryStandaloneStatsOnMetrics:
// export it, then name it here.
var statsMetrics = map[reflect.Type]map[string]string{
	reflect.TypeFor[mqtt.Stats](): {
		"Connections":      "smartgo_mqtt_connections",
		"Clients":          "smartgo_mqtt_sessions_online",
		"Sessions":         "smartgo_mqtt_sessions",
		"Subscriptions":    "smartgo_mqtt_subscriptions",
		"Received":         "smartgo_mqtt_messages_received_total", // sum over qos
		"Sent":             "smartgo_mqtt_messages_sent_total",     // sum over qos
		"PacketsReceived":  "smartgo_mqtt_packets_received_total",
		"PacketsSent":      "smartgo_mqtt_packets_sent_total",
		"BytesReceived":    "smartgo_mqtt_received_bytes_total",
		"BytesSent":        "smartgo_mqtt_sent_bytes_total",
		"Dropped":          "smartgo_mqtt_messages_dropped_total",
		"DroppedQoS0":      "smartgo_mqtt_dropped_qos0_total",
		"Overflows":        "smartgo_mqtt_queue_overflows_total",
		"SlowReaders":      "smartgo_mqtt_slow_reader_disconnects_total",
		"ReceivedQoS":      "smartgo_mqtt_messages_received_total",
		"SentQoS":          "smartgo_mqtt_messages_sent_total",
		"AuthFailures":     "smartgo_mqtt_auth_failures_total",
		"InboundBytes":     "smartgo_mqtt_inbound_bytes",
		"InboundThrottled": "smartgo_mqtt_inbound_throttled_total",
		"InboundStalled":   "smartgo_mqtt_inbound_stalled_disconnects_total",
	},
	reflect.TypeFor[iothub.Stats](): {
		"AuthFailures":     "smartgo_iothub_auth_failures_total",
		"TwinRequests":     "smartgo_iothub_twin_requests_total",
		"TwinErrors":       "smartgo_iothub_twin_errors_total",
		"Throttled":        "smartgo_iothub_twin_throttled_total",
		"MethodCalls":      "smartgo_iothub_method_calls_total",
		"UnknownResponses": "smartgo_iothub_method_unknown_responses_total",
		"C2DSent":          "smartgo_iothub_c2d_sent_total",
		"DesiredPushed":    "smartgo_iothub_desired_pushed_total",
		"OwnerReads":       "smartgo_iothub_owner_reads_total",
	},
	reflect.TypeFor[amqp.Stats](): {
		"Connections":     "smartgo_amqp_connections",
		"Channels":        "smartgo_amqp_channels",
		"Consumers":       "smartgo_amqp_consumers",
		"Queues":          "smartgo_amqp_queues",
		"MessagesReady":   "smartgo_amqp_messages_ready",
		"MessagesUnacked": "smartgo_amqp_messages_unacked",
		"Published":       "smartgo_amqp_published_total",
		"Delivered":       "smartgo_amqp_delivered_total",
		"Acked":           "smartgo_amqp_acked_total",
		"Confirmed":       "smartgo_amqp_confirmed_total",
		"Returned":        "smartgo_amqp_returned_total",
		"Dropped":         "smartgo_amqp_dropped_total",
	},
	reflect.TypeFor[twin.Stats](): {
		"Devices":      "smartgo_twin_devices",
		"Modules":      "smartgo_twin_modules",
		"Connected":    "smartgo_twin_connected",
		"IndexEntries": "smartgo_twin_index_entries",
	},
	reflect.TypeFor[statestore.Stats](): {
		"Keys":       "smartgo_statestore_keys",
		"Bytes":      "smartgo_statestore_bytes",
		"Expiring":   "smartgo_statestore_expiring_keys",
		"History":    "smartgo_statestore_history_changes",
		"Cached":     "smartgo_statestore_cached_replies",
		"Watches":    "smartgo_statestore_watches",
		"Applied":    "smartgo_statestore_applied_version_timestamp_seconds",
		"HistoryMin": "smartgo_statestore_history_floor_timestamp_seconds",
	},
}

// Every counter of the MQTT engine (mqtt.Stats), the AMQP engine
// (amqp.Stats), the IoT hub
// (iothub.Stats), the twin shards (twin.Stats) and the state store shards
// (statestore.Stats) is on the /metrics of a
// real standalone: the fields are walked by reflection, so a new field
// without a metric fails here (mqtt.Stats.Overflows had none).
func TestCmdBinaryStandaloneStatsOnMetrics(t *testing.T) {
	data := t.TempDir()
	p := startBin(t, "standalone", "-data", data, "-set", "metrics.listen=127.0.0.1:0", "-set", "registry.listen=127.0.0.1:0",
		"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=",
		"-set", "iothub.enabled=true", "-set", "iothub.device_auth=none", "-set", "amqp.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	addr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	p.waitLog(t, regexp.MustCompile(`standalone running`), 60*time.Second)
	body := metricsText(t, addr)
	families := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			families[line[:i]] = true
		}
	}
	for typ, fields := range statsMetrics {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, ok := fields[f.Name]
			switch {
			case !ok:
				t.Errorf("%v.%s has no metric: export it and name it in statsMetrics", typ, f.Name)
			case !families[name]:
				t.Errorf("%v.%s: no %s on /metrics", typ, f.Name, name)
			}
		}
		for name := range fields {
			if _, ok := typ.FieldByName(name); !ok {
				t.Errorf("statsMetrics names %v.%s, which is no field", typ, name)
			}
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}
