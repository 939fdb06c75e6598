package bridge

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Message property names (see doc.go).
const (
	PropTopic           = "MQTT_TOPIC"
	PropQoS             = "MQTT_QOS"
	PropRetain          = "MQTT_RETAIN"
	PropClientID        = "MQTT_CLIENT_ID"
	PropUsername        = "MQTT_USERNAME"
	PropUserProperties  = "MQTT_USER_PROPERTIES"
	PropResponseTopic   = "MQTT_RESPONSE_TOPIC"
	PropCorrelationData = "MQTT_CORRELATION_DATA"
	PropContentType     = "MQTT_CONTENT_TYPE"
	PropPayloadFormat   = "MQTT_PAYLOAD_FORMAT"
	PropExpiryAt        = "MQTT_EXPIRY_AT"
	PropEmptyPayload    = "MQTT_EMPTY_PAYLOAD"
)

// MaxClientIDLen is the longest MQTT client id the bridge accepts (bytes;
// MQTT allows 65,535): the id goes into the properties of every session
// record and every message its client publishes (MQTT_CLIENT_ID), and a
// broker record's properties hold client.MaxPropertiesLen (32,767) bytes.
// clientIDReserve is what the rest of such a record's properties takes:
// the property names and separators, the producer's UNIQ_KEY (56
// characters at most), the CRC trailer, and a publish's topic, QoS and
// user name when they are short. bridge.New caps mqtt.Options.
// MaxClientIDLen at it, so a longer id is refused at CONNECT (0x85;
// 3.1.1: 0x02) instead of failing every session save and QoS 1 publish.
const MaxClientIDLen = MaxIdentityLen

// MaxIdentityLen is the most bytes an MQTT client id and user name may
// take together (both go into the properties of every message the client
// publishes, MQTT_CLIENT_ID and MQTT_USERNAME): the record's room less
// clientIDReserve, as for the id alone. bridge.New caps mqtt.Options.
// MaxIdentityLen at it, so a CONNECT whose user name cannot fit with its
// id is refused (0x86; 3.1.1: 0x04) instead of having every publish
// refused.
const MaxIdentityLen = client.MaxPropertiesLen - clientIDReserve

const clientIDReserve = 1024

// emptyBody stands for an empty MQTT payload (brokers refuse empty bodies).
var emptyBody = []byte{0}

func encodable(s string) bool { return !strings.ContainsAny(s, "\x01\x02") }

// EncodeMessage converts an MQTT message into the broker message of topic
// that the bridge stores for it (doc.go): a back end producing it itself
// (to EgressTopic, say) reaches devices as the bridge's own would.
func EncodeMessage(m *mqtt.Message, topic string) (*client.Message, error) { return toBroker(m, topic) }

// toBroker converts an MQTT message into a broker message of topic.
func toBroker(m *mqtt.Message, topic string) (*client.Message, error) {
	for _, s := range []string{m.Topic, m.ResponseTopic, m.ContentType, m.ClientID, m.Username} {
		if !encodable(s) {
			return nil, fmt.Errorf("%w: %q", ErrUnencodable, s)
		}
	}
	p := map[string]string{PropTopic: m.Topic, PropQoS: strconv.Itoa(int(m.QoS))}
	if m.Retain {
		p[PropRetain] = "1"
	}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set(PropClientID, m.ClientID)
	set(PropUsername, m.Username)
	set(PropResponseTopic, m.ResponseTopic)
	set(PropContentType, m.ContentType)
	if m.CorrelationData != nil {
		p[PropCorrelationData] = base64.StdEncoding.EncodeToString(m.CorrelationData)
		if len(m.CorrelationData) == 0 {
			p[PropCorrelationData] = "="
		}
	}
	if m.HasPayloadFormat {
		p[PropPayloadFormat] = strconv.Itoa(int(m.PayloadFormat))
	}
	if !m.Expiry.IsZero() {
		p[PropExpiryAt] = strconv.FormatInt(m.Expiry.UnixMilli(), 10)
	}
	if len(m.User) > 0 {
		pairs := make([][2]string, len(m.User))
		for i, u := range m.User {
			pairs[i] = [2]string{u.Key, u.Value}
		}
		b, _ := json.Marshal(pairs) // JSON escapes 0x01/0x02 as \u0001
		p[PropUserProperties] = string(b)
	}
	body := m.Payload
	if len(body) == 0 {
		body = emptyBody
		p[PropEmptyPayload] = "1"
	}
	return &client.Message{Topic: topic, Body: body, Properties: p}, nil
}

// fromBroker converts a consumed broker message into an MQTT message. A
// message without MQTT_TOPIC is delivered on its broker topic name at the
// QoS of MQTT_QOS (default 1). MQTT properties a client could not be sent
// are left out (fromBrokerNoting says which).
func fromBroker(x *client.MessageExt) *mqtt.Message {
	m, _ := fromBrokerNoting(x)
	return m
}

// fromBrokerNoting is fromBroker that also names the MQTT properties it
// left out ("" when none). A back end producing to a device-facing topic
// sets them as it likes, and one MQTT 5 cannot encode (a response topic
// with a wildcard, a string over 65,535 bytes or with U+0000) made every
// attempt to send the message fail: a QoS 1 or 2 message stayed in flight
// for good, and once Receive Maximum of them had come the session
// received nothing more, also after reconnecting. Such a property is
// dropped and the message delivered without it. An expiry further away
// than MQTT 5 can express is cut to the longest interval it can.
func fromBrokerNoting(x *client.MessageExt) (*mqtt.Message, string) {
	p := x.Properties
	m := &mqtt.Message{Topic: p[PropTopic], Payload: x.Body, QoS: 1, Retain: p[PropRetain] == "1",
		ClientID: p[PropClientID], Username: p[PropUsername], ResponseTopic: p[PropResponseTopic],
		ContentType: p[PropContentType]}
	if m.Topic == "" {
		m.Topic = x.Topic
	}
	var dropped []string
	if m.ResponseTopic != "" && !packets.ValidTopicName(m.ResponseTopic) {
		m.ResponseTopic = ""
		dropped = append(dropped, PropResponseTopic)
	}
	if m.ContentType != "" && !mqttString(m.ContentType) {
		m.ContentType = ""
		dropped = append(dropped, PropContentType)
	}
	if q, err := strconv.Atoi(p[PropQoS]); err == nil && q >= 0 && q <= 2 {
		m.QoS = byte(q)
	}
	if p[PropEmptyPayload] == "1" {
		m.Payload = nil
	}
	if v, ok := p[PropCorrelationData]; ok {
		if v == "=" {
			m.CorrelationData = []byte{}
		} else if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) <= math.MaxUint16 {
			m.CorrelationData = b
		} else if err == nil {
			dropped = append(dropped, PropCorrelationData)
		}
	}
	if v, err := strconv.Atoi(p[PropPayloadFormat]); err == nil && v >= 0 && v <= 1 {
		m.HasPayloadFormat, m.PayloadFormat = true, byte(v)
	}
	if v, err := strconv.ParseInt(p[PropExpiryAt], 10, 64); err == nil && v > 0 {
		m.Expiry = time.UnixMilli(v)
		// maxExpiry (0xFFFFFFFF s) is also the longest Message Expiry
		// Interval MQTT 5 can carry.
		if limit := time.Now().Add(maxExpiry); m.Expiry.After(limit) {
			m.Expiry = limit
		}
	}
	if v := p[PropUserProperties]; v != "" {
		var pairs [][2]string
		if json.Unmarshal([]byte(v), &pairs) == nil {
			m.User = make([]mqtt.UserProperty, 0, len(pairs))
			for _, kv := range pairs {
				if mqttString(kv[0]) && mqttString(kv[1]) {
					m.User = append(m.User, mqtt.UserProperty{Key: kv[0], Value: kv[1]})
				}
			}
			if len(m.User) < len(pairs) {
				dropped = append(dropped, PropUserProperties)
			}
		}
	}
	return m, strings.Join(dropped, ",")
}

// mqttString reports whether s can be sent as an MQTT UTF-8 string: at
// most 65,535 bytes of UTF-8 without U+0000.
func mqttString(s string) bool {
	return len(s) <= math.MaxUint16 && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
