package iothub

import (
	"context"
	"encoding/json"
	"time"

	"github.com/smartgo/smartgo/client"
)

// Delivery feedback. A cloud-to-device message sent with the application
// property iothub-ack = positive or full (the service SDKs' message.ack)
// gets a feedback record once the device acknowledges it (an MQTT device
// can only complete a message: its PUBACK). The records go to
// Options.FeedbackTopic, one message each, keyed by the original message
// id; a back end takes them from the AMQP endpoint's
// /messages/serviceBound/feedback link (amqp_feedback.go) in batches, as
// IoT Hub sends them. Expiry and rejection feedback (negative) is not
// produced: MQTT devices cannot reject, and expiries are not tracked per
// message.

// feedbackRecord is one record of IoT Hub's feedback batch (a JSON array
// is the batch message's body).
type feedbackRecord struct {
	OriginalMessageID  string `json:"originalMessageId"`
	Description        string `json:"description"`
	DeviceGenerationID string `json:"deviceGenerationId"`
	DeviceID           string `json:"deviceId"`
	EnqueuedTimeUTC    string `json:"enqueuedTimeUtc"`
	StatusCode         string `json:"statusCode"`
}

// feedback stores one record for a device's message (on the connection
// bookkeeping workers, in order per device; a failure is logged).
func (h *Hub) feedback(deviceID, messageID, status string) {
	at := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	h.lc.enqueue(deviceID, func(ctx context.Context) {
		rec := feedbackRecord{OriginalMessageID: messageID, Description: status, DeviceID: deviceID,
			DeviceGenerationID: h.generation(ctx, deviceID), EnqueuedTimeUTC: at, StatusCode: status}
		body, _ := json.Marshal(rec)
		rctx, cancel := h.requestCtx(ctx)
		defer cancel()
		m := &client.Message{Topic: h.opts.FeedbackTopic, Body: body, Keys: []string{messageID}}
		if _, err := h.prod.Send(rctx, m); err != nil {
			h.log.Warn("iothub: delivery feedback not stored", "device", deviceID, "message_id", messageID, "err", err)
		}
	})
}
