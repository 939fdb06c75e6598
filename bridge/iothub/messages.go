package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/smartgo/smartgo/bridge"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	tw "github.com/smartgo/smartgo/twin"
)

// Telemetry and cloud-to-device messages.
//
// Telemetry (devices/{id}/messages/events/{bag}, and the module form)
// goes to EventsTopic, a route no node delivers from. The property bag
// becomes broker message properties: application properties under their
// own names, and the system properties under IoT Hub's names:
//
//	$.mid  message-id          $.cid  correlation-id     $.uid  user-id
//	$.ct   content-type        $.ce   content-encoding   $.to   to
//	$.exp  absolute-expiry-time   $.on  iothub-outputname   $.ifid  iothub-interface-id
//	$.sub  dt-subject          other $.x  as sent
//
// with iothub-connection-device-id, iothub-connection-module-id and
// iothub-message-source ("Telemetry") added, and dt-dataschema (the IoT
// Plug and Play model id) when the connection announced one, replacing
// any the device put in the bag; a retained PUBLISH gets
// mqtt-retain=true. An application property whose name could be taken
// for a broker property (upper-case letters, digits and '_' only, like
// KEYS or TAGS, or starting with "MQTT_" or "iothub-") is stored as
// "app-<name>". A bag that does not decode, or holds the bytes 0x01 or
// 0x02, fails the publish.
//
// A cloud-to-device message is an MQTT message on
// devices/{id}/messages/devicebound/{bag}, QoS 1, stored in the bridge's
// egress topic: every node delivers it to the device's session when the
// device is connected and subscribed, an offline persistent session
// (clean session 0, as the device SDKs connect) gets it when it resumes,
// within the session's queue bound, and it is dropped once its expiry has
// passed. The bag holds $.mid, $.to (/devices/{id}/messages/deviceBound),
// $.exp when it expires, $.cid, $.uid, $.ct, $.ce when given, then the
// application properties.

// System properties of a property bag and their broker names.
var bagSystemNames = map[string]string{
	"$.mid": "message-id", "$.cid": "correlation-id", "$.uid": "user-id", "$.ct": "content-type",
	"$.ce": "content-encoding", "$.to": "to", "$.exp": "absolute-expiry-time", "$.on": "iothub-outputname",
	"$.ifid": "iothub-interface-id", "$.sub": "dt-subject",
}

// Broker property names of telemetry.
const (
	PropDeviceID      = "iothub-connection-device-id"
	PropModuleID      = "iothub-connection-module-id"
	PropMessageSource = "iothub-message-source"
	// PropDataSchema is the IoT Plug and Play model id the sending
	// connection announced (none: absent), as IoT Hub stamps it.
	PropDataSchema = "dt-dataschema"
)

var brokerLikeName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// appPropName is the broker name of an application property.
func appPropName(name string) string {
	if brokerLikeName.MatchString(name) || strings.HasPrefix(name, "MQTT_") || strings.HasPrefix(strings.ToLower(name), "iothub-") {
		return "app-" + name
	}
	return name
}

// ingressProps is bridge.Options.IngressProps: the properties of a
// device's telemetry message, with the model id its connection announced.
func (h *Hub) ingressProps(m *mqtt.Message) (map[string]string, error) {
	id, bag, ok := eventsIdentity(m.Topic)
	if !ok {
		return nil, nil
	}
	props, err := EventProperties(id, bag, m.Retain)
	if err == nil {
		if mc, ok := h.models.Load(m.ClientID); ok {
			props[PropDataSchema] = mc.(modelConn).model
		}
	}
	return props, err
}

// modelConn is the model id a device's connection on this node announced
// (Hub.models, by client id; only connections that announced one).
type modelConn struct {
	connID uint64
	model  string
}

// EventProperties decodes a telemetry message's property bag into broker
// message properties (see above).
func EventProperties(id Identity, bag string, retain bool) (map[string]string, error) {
	props, err := DecodeBag(bag)
	if err != nil {
		return nil, err
	}
	out := map[string]string{PropDeviceID: id.DeviceID, PropMessageSource: "Telemetry"}
	if id.ModuleID != "" {
		out[PropModuleID] = id.ModuleID
	}
	if retain {
		out["mqtt-retain"] = "true"
	}
	for _, p := range props {
		name := p.Name
		if strings.HasPrefix(name, "$.") {
			if n, ok := bagSystemNames[name]; ok {
				name = n
			}
		} else {
			name = appPropName(name)
		}
		if strings.ContainsAny(name, "\x01\x02") || strings.ContainsAny(p.Value, "\x01\x02") {
			return nil, fmt.Errorf("%w: property %q holds the byte 0x01 or 0x02", ErrBadRequest, truncate(p.Name, 32))
		}
		if p.Value == "" {
			continue // brokers keep no empty values
		}
		out[name] = p.Value
	}
	return out, nil
}

// C2DMessage is a cloud-to-device message.
type C2DMessage struct {
	DeviceID      string
	Body          []byte
	MessageID     string // "" generates one
	CorrelationID string
	UserID        string
	ContentType   string
	Encoding      string
	// Expiry is when the message expires; zero: the hub's C2DTTL.
	Expiry     time.Time
	Properties []Property // application properties, in order
}

// MQTT returns the message as the device receives it, expiring at
// expiry.
func (c *C2DMessage) MQTT(expiry time.Time) *mqtt.Message {
	props := []Property{{"$.mid", c.MessageID}, {"$.to", "/devices/" + c.DeviceID + "/messages/deviceBound"}}
	if !expiry.IsZero() {
		props = append(props, Property{"$.exp", expiry.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	for _, p := range []Property{{"$.cid", c.CorrelationID}, {"$.uid", c.UserID}, {"$.ct", c.ContentType}, {"$.ce", c.Encoding}} {
		if p.Value != "" {
			props = append(props, p)
		}
	}
	props = append(props, c.Properties...)
	return &mqtt.Message{Topic: c2dTopic(c.DeviceID, props), Payload: c.Body, QoS: 1, Expiry: expiry}
}

// PrepareC2D checks a cloud-to-device message and fills in its id and
// expiry with the given limits.
func PrepareC2D(c *C2DMessage, maxSize int, ttl, maxTTL time.Duration, now time.Time) error {
	if err := (Identity{DeviceID: c.DeviceID}).check(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if strings.ContainsAny(c.DeviceID, "+#") {
		return fmt.Errorf("%w: device id %q cannot be an MQTT topic level", ErrBadRequest, c.DeviceID)
	}
	if len(c.Body) > maxSize {
		return fmt.Errorf("%w: body of %d bytes (at most %d)", ErrTooLarge, len(c.Body), maxSize)
	}
	if c.MessageID == "" {
		c.MessageID = randomHex(16)
	}
	switch {
	case c.Expiry.IsZero():
		c.Expiry = now.Add(ttl)
	case !c.Expiry.After(now):
		return fmt.Errorf("%w: the expiry %s has passed", ErrBadRequest, c.Expiry.UTC().Format(time.RFC3339))
	case c.Expiry.Sub(now) > maxTTL:
		return fmt.Errorf("%w: the expiry is over %s away", ErrBadRequest, maxTTL)
	}
	for _, p := range c.Properties {
		if p.Name == "" || strings.HasPrefix(p.Name, "$") {
			return fmt.Errorf("%w: application property name %q empty or starting with '$'", ErrBadRequest, truncate(p.Name, 32))
		}
	}
	return nil
}

// SendC2D stores a cloud-to-device message for a device (registry mode:
// a registered one).
func (h *Hub) SendC2D(ctx context.Context, c *C2DMessage) error {
	if !h.started.Load() {
		return ErrClosed
	}
	if err := PrepareC2D(c, h.opts.C2DMaxSize, h.opts.C2DTTL, h.opts.C2DMaxTTL, time.Now()); err != nil {
		return err
	}
	gen := "" // read by the prepare if it needs it
	if h.opts.DeviceAuth == AuthRegistry {
		rctx, cancel := h.requestCtx(ctx)
		d, err := h.twins.GetDevice(rctx, c.DeviceID)
		cancel()
		if err != nil {
			return err
		}
		gen = d.GenerationID
	}
	if err := h.prepareC2DFor(ctx, c.DeviceID, gen); err != nil {
		return err
	}
	noted, err := h.noteC2D(ctx, c)
	if err != nil {
		return err
	}
	be := h.br.Backend()
	if err := be.PublishTo(ctx, be.EgressTopic(), c.DeviceID, c.MQTT(c.Expiry)); err != nil {
		if noted {
			h.forgetC2D(c.DeviceID, c.MessageID)
		}
		return fmt.Errorf("iothub: cloud-to-device message: %w", err)
	}
	h.stats.C2DSent.Add(1)
	return nil
}

// noteC2D adds a message about to be stored to its device's queue count
// (the twin shard's ledger: cloudToDeviceMessageCount), or fails with
// the registry's 403 DeviceMaximumQueueDepthExceeded when the device
// holds C2DMaxQueueDepth messages neither acknowledged nor expired. In
// development mode a device that is not registered is not counted
// (noted false).
func (h *Hub) noteC2D(ctx context.Context, c *C2DMessage) (noted bool, err error) {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	_, err = h.twins.EnqueueC2D(rctx, c.DeviceID, c.MessageID, c.Expiry, h.opts.C2DMaxQueueDepth)
	switch {
	case err == nil:
		return true, nil
	case h.opts.DeviceAuth != AuthRegistry && errors.Is(err, twincli.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("iothub: cloud-to-device message for %s: %w", c.DeviceID, err)
}

// forgetC2D takes a message out of its device's queue count: the device
// acknowledged it, or it was never stored. The call runs on the
// connection bookkeeping workers (in order per device); a failure is
// logged, and the message then leaves the count at its expiry.
func (h *Hub) forgetC2D(deviceID, messageID string) {
	h.lc.enqueue(deviceID, func(ctx context.Context) {
		rctx, cancel := h.requestCtx(ctx)
		defer cancel()
		if err := h.twins.AckC2D(rctx, deviceID, messageID); err != nil && !errors.Is(err, twincli.ErrNotFound) {
			h.log.Warn("iothub: cloud-to-device message left in its device's count until it expires",
				"device", deviceID, "message_id", messageID, "err", err)
		}
	})
}

// onAcked (mqtt.Options.OnAcked) takes a cloud-to-device message the
// device acknowledged out of its queue count. It must not block: the
// registry call goes to a worker.
func (h *Hub) onAcked(clientID string, m *mqtt.Message) {
	if !h.started.Load() {
		return
	}
	// Every acknowledged QoS 1 or 2 message of every client comes here:
	// cut the prefix piece by piece, without building it.
	rest, ok := strings.CutPrefix(m.Topic, "devices/")
	if ok {
		rest, ok = strings.CutPrefix(rest, clientID)
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, "/messages/devicebound/")
	}
	if !ok {
		return
	}
	props, err := DecodeBag(rest)
	if err != nil {
		return
	}
	var mid, ack string
	for _, p := range props {
		switch p.Name {
		case "$.mid":
			mid = p.Value
		case "iothub-ack":
			ack = p.Value
		}
	}
	if mid == "" {
		return
	}
	h.forgetC2D(clientID, mid)
	if ack == "positive" || ack == "full" {
		h.feedback(clientID, mid, "Success")
	}
}

// prepareC2D makes sure the messages stored for a device from now on wait
// for it even if it never connected (or its session ended): such a device
// has no persistent session that would hold them, so it gets one with the
// subscription the device SDKs make, devices/{id}/messages/devicebound/#
// at QoS 1, which its first connect (clean session 0) resumes. An
// offline session a connection left for an identity that has never
// connected is a deleted identity's of the same id, as is a session
// prepared for another generation of the identity (the prepared record
// keeps the generation id): it is replaced too, so the new device does
// not receive the old one's messages (as on IoT Hub, where deleting an
// identity drops its queue). Every create runs
// this (twincli.Options.PrepareC2D), as does every send.
func (h *Hub) prepareC2D(ctx context.Context, deviceID string) error {
	return h.prepareC2DFor(ctx, deviceID, "")
}

// prepareC2DFor is prepareC2D for the identity generation gen, just read
// from the registry ("": read when needed).
func (h *Hub) prepareC2DFor(ctx context.Context, deviceID, gen string) error {
	if strings.ContainsAny(deviceID, "+#") {
		return nil // no topic of it can be subscribed to: it gets no C2D
	}
	sub := mqtt.Subscription{Filter: "devices/" + deviceID + "/messages/devicebound/#", QoS: 1}
	made, err := h.br.Backend().PrepareSessionReplacing(ctx, deviceID, []mqtt.Subscription{sub}, h.sessionExpiry, bridge.Replacer{
		Tag: func() string {
			if gen != "" {
				return gen
			}
			return h.generation(ctx, deviceID)
		},
		Left: func(leftAt time.Time) bool { return h.leftBeforeCreated(ctx, deviceID, leftAt) },
	})
	if err != nil {
		return fmt.Errorf("iothub: session for %s's cloud-to-device messages: %w", deviceID, err)
	}
	if made {
		h.log.Debug("iothub: session prepared for a device that has none", "device", deviceID)
	}
	return nil
}

// generation is device id's generation id, new with every creation of
// the identity ("" when the registry cannot say): the tag of the session
// prepared for it, so that one prepared for a deleted identity of the
// same id is replaced, whether or not either ever connected.
func (h *Hub) generation(ctx context.Context, id string) string {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	d, err := h.twins.GetDevice(rctx, id)
	if err != nil {
		h.log.Debug("iothub: generation of a device to prepare", "device", id, "err", err)
		return ""
	}
	return d.GenerationID
}

// leftBeforeCreated reports whether the session of device id that a
// connection left at leftAt belongs to an identity deleted before this
// one: the registry says this one has never connected, and was created
// after leftAt (a twin that never connected has the reported properties
// of its creation). When the registry cannot say, it reports false: a
// session is kept rather than dropped.
func (h *Hub) leftBeforeCreated(ctx context.Context, id string, leftAt time.Time) bool {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	d, err := h.twins.GetDevice(rctx, id)
	if err == nil && d.ConnectionStateUpdatedTime != "" && d.ConnectionStateUpdatedTime != tw.FormatTime(0) {
		return false // it has connected: the session may be its own
	}
	var t *twincli.Twin
	if err == nil {
		t, err = h.twins.GetTwin(rctx, id, "")
	}
	var doc struct {
		Properties struct {
			Reported struct {
				Metadata struct {
					LastUpdated time.Time `json:"$lastUpdated"`
				} `json:"$metadata"`
			} `json:"reported"`
		} `json:"properties"`
	}
	if err == nil {
		err = json.Unmarshal(t.JSON, &doc)
	}
	if err != nil {
		h.log.Debug("iothub: creation of a device to prepare", "device", id, "err", err)
		return false
	}
	created := doc.Properties.Reported.Metadata.LastUpdated
	return !created.IsZero() && leftAt.Before(created)
}
