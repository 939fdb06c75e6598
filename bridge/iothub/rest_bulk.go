package iothub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	twincli "github.com/smartgo/smartgo/client/twin"
)

// POST /devices: IoT Hub's bulk registry operation, what the service
// SDKs' addDevices, updateDevices and removeDevices send. The body is an
// array of at most maxBulk entries
//
//	{"id":"d1","importMode":"create","eTag":"...","status":"enabled",
//	 "statusReason":"...","authentication":{...},"capabilities":{...}}
//
// with importMode create, createOrUpdate, update, updateIfMatchETag,
// delete or deleteIfMatchETag (any case). Each entry is applied on its
// own, in order; the answer is
//
//	{"isSuccessful":true,"errors":[],"warnings":[]}
//
// with 200 when every entry succeeded, else 400 and one
// {"deviceId","errorCode","errorStatus"} per failed entry (the others
// are applied).

// maxBulk bounds the entries of one bulk request (IoT Hub's limit).
const maxBulk = 100

// bulkDevice is one entry of a bulk registry operation.
type bulkDevice struct {
	ID             string                  `json:"id"`
	ImportMode     string                  `json:"importMode"`
	ETag           string                  `json:"eTag"`
	Status         string                  `json:"status"`
	StatusReason   string                  `json:"statusReason"`
	Authentication *twincli.Authentication `json:"authentication"`
	Capabilities   *twincli.Capabilities   `json:"capabilities"`
}

// bulkError is a failed entry.
type bulkError struct {
	DeviceID    string `json:"deviceId"`
	ErrorCode   string `json:"errorCode"`
	ErrorStatus string `json:"errorStatus"`
}

// bulkResult answers a bulk registry operation.
type bulkResult struct {
	IsSuccessful bool        `json:"isSuccessful"`
	Errors       []bulkError `json:"errors"`
	Warnings     []bulkError `json:"warnings"`
}

// bulkDevices serves POST /devices.
func (h *Hub) bulkDevices(w http.ResponseWriter, r *http.Request) {
	var entries []bulkDevice
	if err := decodeJSON(r, &entries); err != nil {
		h.fail(w, r, err)
		return
	}
	if len(entries) == 0 || len(entries) > maxBulk {
		h.fail(w, r, fmt.Errorf("%w: a bulk operation holds 1 to %d devices, not %d", ErrBadRequest, maxBulk, len(entries)))
		return
	}
	res := bulkResult{IsSuccessful: true, Errors: []bulkError{}, Warnings: []bulkError{}}
	for i := range entries {
		if err := h.bulkOne(r, &entries[i]); err != nil {
			st, code, text := statusOf(err)
			res.IsSuccessful = false
			res.Errors = append(res.Errors, bulkError{DeviceID: entries[i].ID, ErrorCode: code,
				ErrorStatus: strconv.Itoa(st) + ": " + text})
		}
	}
	body, _ := json.Marshal(res)
	st := http.StatusOK
	if !res.IsSuccessful {
		st = http.StatusBadRequest
		h.log.Info("iothub: API request refused", "method", r.Method, "path", "/devices", "status", st,
			"reason", "bulk", "failed", len(res.Errors))
	}
	writeJSON(w, st, body)
}

// bulkOne applies one entry.
func (h *Hub) bulkOne(r *http.Request, e *bulkDevice) error {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	if e.ID == "" {
		return fmt.Errorf("%w: an entry without id", ErrBadRequest)
	}
	d := &twincli.Device{DeviceID: e.ID, Status: e.Status, StatusReason: e.StatusReason,
		Authentication: e.Authentication, Capabilities: e.Capabilities}
	var mode twincli.PutMode
	ifMatch := "*"
	switch strings.ToLower(e.ImportMode) {
	case "delete", "deleteifmatchetag":
		if strings.EqualFold(e.ImportMode, "deleteIfMatchETag") {
			ifMatch = e.ETag
		}
		return h.deleteDevice(ctx, e.ID, ifMatch)
	case "create":
		mode, ifMatch = twincli.PutCreate, ""
	case "createorupdate":
		mode = twincli.PutUpsert
	case "update":
		mode = twincli.PutUpdate
	case "updateifmatchetag":
		mode, ifMatch = twincli.PutUpdate, e.ETag
	default:
		return fmt.Errorf("%w: importMode %q is not create, createOrUpdate, update, updateIfMatchETag, delete or deleteIfMatchETag",
			ErrBadRequest, truncate(e.ImportMode, 32))
	}
	if ifMatch == "" && mode != twincli.PutCreate {
		return fmt.Errorf("%w: %s without eTag", ErrBadRequest, e.ImportMode)
	}
	// A device it creates gets its cloud-to-device session (PrepareC2D).
	_, err := h.twins.PutDevice(ctx, d, mode, ifMatch)
	return err
}
