package bridge

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
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
// QoS of MQTT_QOS (default 1).
func fromBroker(x *client.MessageExt) *mqtt.Message {
	p := x.Properties
	m := &mqtt.Message{Topic: p[PropTopic], Payload: x.Body, QoS: 1, Retain: p[PropRetain] == "1",
		ClientID: p[PropClientID], Username: p[PropUsername], ResponseTopic: p[PropResponseTopic],
		ContentType: p[PropContentType]}
	if m.Topic == "" {
		m.Topic = x.Topic
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
		} else if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			m.CorrelationData = b
		}
	}
	if v, err := strconv.Atoi(p[PropPayloadFormat]); err == nil && v >= 0 && v <= 1 {
		m.HasPayloadFormat, m.PayloadFormat = true, byte(v)
	}
	if v, err := strconv.ParseInt(p[PropExpiryAt], 10, 64); err == nil && v > 0 {
		m.Expiry = time.UnixMilli(v)
	}
	if v := p[PropUserProperties]; v != "" {
		var pairs [][2]string
		if json.Unmarshal([]byte(v), &pairs) == nil {
			m.User = make([]mqtt.UserProperty, len(pairs))
			for i, kv := range pairs {
				m.User[i] = mqtt.UserProperty{Key: kv[0], Value: kv[1]}
			}
		}
	}
	return m
}
