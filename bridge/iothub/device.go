package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	tw "github.com/smartgo/smartgo/twin"
)

// Device requests: twin GET and reported PATCH, answered on
// $iothub/twin/res/{status}/?$rid={rid}[&$version={n}] through the
// device's own subscription ($iothub/twin/res/#). Success is 200 with the
// desired and reported properties (GET) or 204 with the new reported
// $version (PATCH); a failure carries a JSON body
//
//	{"errorCode":400004,"code":"ArgumentInvalid","message":"...","timestampUtc":"..."}
//
// (errorCode is what the SDKs look for; status*1000 + a number per code).
// Statuses: 400 malformed request or JSON, or a broken document rule; 404
// the identity is gone; 412 the $version condition failed; 413 over a
// size limit; 429 over the device's twin request rate; 500 a shard
// failure; 503 the shard is unavailable.

// tokenBucket limits a device's twin requests: rate per second, a burst
// of rate; rate <= 0 is unlimited.
type tokenBucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

func (b *tokenBucket) init(rate int, now time.Time) {
	b.rate, b.tokens, b.last = float64(rate), float64(rate), now
}

// take spends one token; false when none is left.
func (b *tokenBucket) take(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// admit applies the rate of the device's connection on this node.
func (h *Hub) admit(clientID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dev[clientID]
	return d == nil || d.bucket.take(time.Now())
}

// twinHandler makes the handler of a twin request topic: serve runs for
// a device's request that has a $rid and is within the device's rate.
func (h *Hub) twinHandler(serve func(ctx context.Context, from mqtt.ClientInfo, id Identity, rid string, msg *mqtt.Message)) mqtt.Handler {
	return func(ctx context.Context, from mqtt.ClientInfo, msg *mqtt.Message) error {
		id, rid, ok := h.twinRequest(from, msg)
		if !ok {
			return mqtt.ErrNotAuthorized
		}
		if rid == "" {
			return nil
		}
		rctx, cancel := h.requestCtx(ctx)
		err := h.setUpAgain(rctx, from.ClientID)
		cancel()
		if err != nil {
			h.twinError(from, rid, id, err)
			return nil
		}
		serve(ctx, from, id, rid, msg)
		return nil
	}
}

// serveTwinGet answers $iothub/twin/GET/?$rid=.
func (h *Hub) serveTwinGet(ctx context.Context, from mqtt.ClientInfo, id Identity, rid string, _ *mqtt.Message) {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	// A device GETs its twin right after connecting and relies on
	// desired-change notifications for everything later: answer once
	// the notifications are on.
	h.watchingDone(rctx, from.ClientID)
	props, err := h.twins.GetProperties(rctx, id.DeviceID, id.ModuleID)
	if err != nil {
		h.twinError(from, rid, id, err)
		return
	}
	h.reply(from.ClientID, twinResponseTopic(200, rid, 0), props.JSON)
}

// serveTwinPatch answers $iothub/twin/PATCH/properties/reported/?$rid=.
func (h *Hub) serveTwinPatch(ctx context.Context, from mqtt.ClientInfo, id Identity, rid string, msg *mqtt.Message) {
	ifVersion, err := versionParam(msg.Topic)
	if err != nil {
		h.twinError(from, rid, id, err)
		return
	}
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	ver, err := h.twins.PatchReported(rctx, id.DeviceID, id.ModuleID, msg.Payload, ifVersion)
	if err != nil {
		h.twinError(from, rid, id, err)
		return
	}
	h.reply(from.ClientID, twinResponseTopic(204, rid, ver), nil)
}

// twinRequest checks a twin request: from a device, with a $rid, within
// the device's rate. ok is false for a client that is not a device; rid
// is "" when the request was answered already (an error).
func (h *Hub) twinRequest(from mqtt.ClientInfo, msg *mqtt.Message) (id Identity, rid string, ok bool) {
	id, ok = h.deviceOf(from)
	if !ok {
		h.log.Info("iothub: twin request from a client that is not a device", "client", from.ClientID, "topic", truncate(msg.Topic, 96))
		return id, "", false
	}
	h.stats.TwinRequests.Add(1)
	rid, err := requestID(msg.Topic)
	if err != nil {
		h.twinError(from, "", id, err)
		return id, "", true
	}
	if !h.admit(from.ClientID) {
		h.stats.Throttled.Add(1)
		h.twinError(from, rid, id, fmt.Errorf("%w: over %d twin requests per second", ErrThrottled, h.opts.TwinRate))
		return id, "", true
	}
	return id, rid, true
}

// reply puts a response into the device's session through its
// $iothub/twin/res/# subscription.
func (h *Hub) reply(clientID, topic string, payload []byte) {
	if err := h.srv.SendToSubscriber(clientID, &mqtt.Message{Topic: topic, Payload: payload, QoS: 1}); err != nil {
		h.log.Debug("iothub: twin response not delivered", "device", clientID, "err", err)
	}
}

// twinError answers a twin request with an error status and body.
func (h *Hub) twinError(from mqtt.ClientInfo, rid string, id Identity, err error) {
	h.stats.TwinErrors.Add(1)
	st, code, text := statusOf(err)
	// One line per outcome and interval: a device drives these.
	if st >= 500 {
		h.log.Warn("iothub: twin request failed", "device", id.String(), "status", st, "reason", code, "detail", text)
	} else {
		h.log.Info("iothub: twin request refused", "device", id.String(), "status", st, "reason", code, "detail", text)
	}
	body, _ := json.Marshal(errorBody{ErrorCode: st*1000 + codeNumber(code), Code: code, Message: text,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano)})
	h.reply(from.ClientID, twinResponseTopic(st, rid, 0), body)
}

// errorBody is the JSON of a failed device request.
type errorBody struct {
	ErrorCode int    `json:"errorCode"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Timestamp string `json:"timestampUtc"`
}

// statusOf maps an error to an HTTP-style status, an IoT Hub error code
// name and the text for the client.
func statusOf(err error) (int, string, string) {
	var te *twincli.Error
	switch {
	case errors.As(err, &te):
		return te.Status, te.Code, te.Msg
	case errors.Is(err, ErrBadRequest), errors.Is(err, twincli.ErrBadContinuation):
		return 400, "ArgumentInvalid", err.Error()
	case errors.Is(err, ErrBadToken), errors.Is(err, ErrBadSignature), errors.Is(err, ErrTokenExpired), errors.Is(err, ErrUnauthorized):
		return 401, "IotHubUnauthorizedAccess", err.Error()
	case errors.Is(err, ErrDeviceNotOnline):
		return 404, "DeviceNotOnline", err.Error()
	case errors.Is(err, ErrResponseTooLarge):
		return 413, "MessageTooLarge", err.Error()
	case errors.Is(err, ErrTooLarge):
		return 413, "RequestEntityTooLarge", err.Error()
	case errors.Is(err, ErrThrottled):
		return 429, "ThrottlingException", err.Error()
	case errors.Is(err, ErrMethodTimeout):
		return 504, "GatewayTimeout", err.Error()
	case errors.Is(err, twincli.ErrUnavailable), errors.Is(err, twincli.ErrNoRoute), errors.Is(err, ErrClosed),
		errors.Is(err, context.DeadlineExceeded):
		return 503, "ServiceUnavailable", "the twin shard is unavailable; retry"
	}
	return 500, "ServerError", "internal error"
}

// codeNumbers number error codes within their status, as IoT Hub does
// for the ones the SDKs know; others are 1.
var codeNumbers = map[string]int{"ArgumentInvalid": 4, "ModuleNotFound": 10, "DeviceNotOnline": 103, "GatewayTimeout": 101,
	tw.CodeQueueDepthExceeded: 4}

func codeNumber(code string) int {
	if n, ok := codeNumbers[code]; ok {
		return n
	}
	return 1
}
