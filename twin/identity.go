package twin

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// Device is a device identity as the identity registry shows it: IoT
// Hub's JSON shape, so a REST front can pass it through. On a create or
// update only DeviceID, Status, StatusReason, Authentication and
// Capabilities are read; the rest is maintained by the engine.
type Device struct {
	DeviceID                   string          `json:"deviceId"`
	GenerationID               string          `json:"generationId,omitempty"`
	Etag                       string          `json:"etag,omitempty"`
	ConnectionState            string          `json:"connectionState,omitempty"`
	Status                     string          `json:"status,omitempty"`
	StatusReason               string          `json:"statusReason,omitempty"`
	ConnectionStateUpdatedTime string          `json:"connectionStateUpdatedTime,omitempty"`
	StatusUpdatedTime          string          `json:"statusUpdatedTime,omitempty"`
	LastActivityTime           string          `json:"lastActivityTime,omitempty"`
	CloudToDeviceMessageCount  int64           `json:"cloudToDeviceMessageCount"`
	Authentication             *Authentication `json:"authentication,omitempty"`
	Capabilities               *Capabilities   `json:"capabilities,omitempty"`
}

// Module is a module identity ({deviceId}/{moduleId}). On a create or
// update only ModuleID, DeviceID, ManagedBy and Authentication are read.
type Module struct {
	ModuleID                   string          `json:"moduleId"`
	DeviceID                   string          `json:"deviceId"`
	ManagedBy                  string          `json:"managedBy,omitempty"`
	GenerationID               string          `json:"generationId,omitempty"`
	Etag                       string          `json:"etag,omitempty"`
	ConnectionState            string          `json:"connectionState,omitempty"`
	ConnectionStateUpdatedTime string          `json:"connectionStateUpdatedTime,omitempty"`
	LastActivityTime           string          `json:"lastActivityTime,omitempty"`
	CloudToDeviceMessageCount  int64           `json:"cloudToDeviceMessageCount"`
	Authentication             *Authentication `json:"authentication,omitempty"`
}

// Authentication is how an identity proves itself: Type "sas" with a
// SymmetricKey, "selfSigned" with an X509Thumbprint, "certificateAuthority"
// (a certificate chained to a trusted CA, no per-identity secret), or
// "none".
type Authentication struct {
	SymmetricKey   *SymmetricKey   `json:"symmetricKey,omitempty"`
	X509Thumbprint *X509Thumbprint `json:"x509Thumbprint,omitempty"`
	Type           string          `json:"type,omitempty"`
}

// SymmetricKey holds the two base64 keys SAS tokens are signed with.
type SymmetricKey struct {
	PrimaryKey   string `json:"primaryKey"`
	SecondaryKey string `json:"secondaryKey"`
}

// X509Thumbprint holds the hex SHA-1 (40 digits) or SHA-256 (64 digits)
// thumbprints of the accepted client certificates, upper case.
type X509Thumbprint struct {
	PrimaryThumbprint   string `json:"primaryThumbprint"`
	SecondaryThumbprint string `json:"secondaryThumbprint"`
}

// Capabilities of a device.
type Capabilities struct {
	IotEdge bool `json:"iotEdge"`
}

// Authentication types (the AUTH byte of identity records, FROZEN).
const (
	authSAS        = 0
	authSelfSigned = 1
	authCA         = 2
	authNone       = 3
)

var authNames = [...]string{"sas", "selfSigned", "certificateAuthority", "none"}

// Identity status (the STATUS byte, FROZEN).
const (
	statusEnabled  = 0
	statusDisabled = 1
)

// Connection states as rendered.
const (
	StateConnected    = "Connected"
	StateDisconnected = "Disconnected"
)

// identity is the registry part of a record.
type identity struct {
	etagVer       int64
	generationID  string
	status        uint8
	statusReason  string
	statusUpdated int64
	auth          uint8
	primaryKey    string
	secondaryKey  string
	primaryThumb  string
	secondThumb   string
	iotEdge       bool
	managedBy     string
	connected     bool
	connID        string // the connection that set connected (SetConnection)
	modelID       string // the last IoT Plug and Play model id announced ("" none)
	connUpdated   int64
	lastActivity  int64
}

// identityInput is what a create or update request sets, validated.
type identityInput struct {
	status       uint8
	statusReason string
	auth         uint8
	primaryKey   string
	secondaryKey string
	primaryThumb string
	secondThumb  string
	iotEdge      bool
	managedBy    string
}

// parseDeviceBody reads a Device JSON for deviceID.
func parseDeviceBody(body []byte, deviceID string) (identityInput, *Error) {
	var d Device
	if err := decodeStrict(body, &d); err != nil {
		return identityInput{}, err
	}
	if d.DeviceID != "" && d.DeviceID != deviceID {
		return identityInput{}, invalidf("deviceId %q in the body differs from %q", truncate(d.DeviceID, 64), deviceID)
	}
	in := identityInput{statusReason: d.StatusReason}
	switch strings.ToLower(d.Status) {
	case "", "enabled":
	case "disabled":
		in.status = statusDisabled
	default:
		return identityInput{}, invalidf("status %q: enabled or disabled", truncate(d.Status, 32))
	}
	if len(d.StatusReason) > MaxStringBytes {
		return identityInput{}, invalidf("statusReason: %d bytes (at most %d)", len(d.StatusReason), MaxStringBytes)
	}
	if d.Capabilities != nil {
		in.iotEdge = d.Capabilities.IotEdge
	}
	return in, parseAuth(d.Authentication, &in)
}

// parseModuleBody reads a Module JSON for deviceID/moduleID.
func parseModuleBody(body []byte, deviceID, moduleID string) (identityInput, *Error) {
	var m Module
	if err := decodeStrict(body, &m); err != nil {
		return identityInput{}, err
	}
	if m.DeviceID != "" && m.DeviceID != deviceID {
		return identityInput{}, invalidf("deviceId %q in the body differs from %q", truncate(m.DeviceID, 64), deviceID)
	}
	if m.ModuleID != "" && m.ModuleID != moduleID {
		return identityInput{}, invalidf("moduleId %q in the body differs from %q", truncate(m.ModuleID, 64), moduleID)
	}
	if len(m.ManagedBy) > MaxIDBytes {
		return identityInput{}, invalidf("managedBy: %d bytes (at most %d)", len(m.ManagedBy), MaxIDBytes)
	}
	in := identityInput{managedBy: m.ManagedBy}
	return in, parseAuth(m.Authentication, &in)
}

func decodeStrict(body []byte, v any) *Error {
	if len(body) == 0 {
		return nil
	}
	if len(body) > MaxBodyBytes {
		return errf(StatusTooLarge, CodeTooLarge, "body: %d bytes (at most %d)", len(body), MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return errf(StatusBadRequest, CodeMalformedJSON, "malformed JSON: %v", err)
	}
	if dec.More() {
		return errf(StatusBadRequest, CodeMalformedJSON, "malformed JSON: trailing data after the document")
	}
	return nil
}

func parseAuth(a *Authentication, in *identityInput) *Error {
	if a == nil {
		return nil // sas with keys the engine generates (or keeps)
	}
	switch strings.ToLower(a.Type) {
	case "", "sas":
		in.auth = authSAS
	case "selfsigned":
		in.auth = authSelfSigned
	case "certificateauthority":
		in.auth = authCA
	case "none":
		in.auth = authNone
	default:
		return invalidf("authentication.type %q: sas, selfSigned, certificateAuthority or none", truncate(a.Type, 32))
	}
	if a.SymmetricKey != nil && in.auth == authSAS {
		for _, k := range []struct{ name, v string }{{"primaryKey", a.SymmetricKey.PrimaryKey}, {"secondaryKey", a.SymmetricKey.SecondaryKey}} {
			if k.v == "" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(k.v)
			if err != nil || len(raw) < 16 || len(raw) > 64 {
				return invalidf("authentication.symmetricKey.%s: base64 of 16 to 64 bytes", k.name)
			}
		}
		in.primaryKey, in.secondaryKey = a.SymmetricKey.PrimaryKey, a.SymmetricKey.SecondaryKey
	}
	if in.auth == authSelfSigned {
		if a.X509Thumbprint == nil || a.X509Thumbprint.PrimaryThumbprint == "" {
			return invalidf("authentication.x509Thumbprint.primaryThumbprint is required for selfSigned")
		}
		var err *Error
		if in.primaryThumb, err = checkThumb("primaryThumbprint", a.X509Thumbprint.PrimaryThumbprint); err != nil {
			return err
		}
		if in.secondThumb, err = checkThumb("secondaryThumbprint", a.X509Thumbprint.SecondaryThumbprint); err != nil {
			return err
		}
	}
	return nil
}

// checkThumb accepts 40 or 64 hex digits (colons allowed) and returns them
// upper case.
func checkThumb(name, v string) (string, *Error) {
	if v == "" {
		return "", nil
	}
	v = strings.ToUpper(strings.ReplaceAll(v, ":", ""))
	if _, err := hex.DecodeString(v); err != nil || (len(v) != 40 && len(v) != 64) {
		return "", invalidf("authentication.x509Thumbprint.%s: 40 or 64 hex digits", name)
	}
	return v, nil
}

// appendDeviceJSON renders a device identity.
func appendDeviceJSON(dst []byte, r *record) []byte {
	id := &r.id
	dst = append(dst, `{"deviceId":`...)
	dst = appendString(dst, r.deviceID)
	dst = append(dst, `,"generationId":`...)
	dst = appendString(dst, id.generationID)
	dst = append(dst, `,"etag":`...)
	dst = appendString(dst, identityEtag(id.etagVer))
	dst = appendConnection(dst, id)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, statusName(id.status))
	dst = append(dst, `,"statusReason":`...)
	dst = appendOptString(dst, id.statusReason)
	dst = append(dst, `,"connectionStateUpdatedTime":`...)
	dst = appendTime(dst, id.connUpdated)
	dst = append(dst, `,"statusUpdatedTime":`...)
	dst = appendTime(dst, id.statusUpdated)
	dst = append(dst, `,"lastActivityTime":`...)
	dst = appendTime(dst, id.lastActivity)
	dst = append(dst, `,"cloudToDeviceMessageCount":`...)
	dst = strconv.AppendInt(dst, c2dCount(r, wallNow()), 10)
	dst = append(dst, `,"authentication":`...)
	dst = appendAuth(dst, id)
	dst = append(dst, `,"capabilities":{"iotEdge":`...)
	dst = strconv.AppendBool(dst, id.iotEdge)
	return append(dst, "}}"...)
}

// appendModuleJSON renders a module identity.
func appendModuleJSON(dst []byte, r *record) []byte {
	id := &r.id
	dst = append(dst, `{"moduleId":`...)
	dst = appendString(dst, r.moduleID)
	dst = append(dst, `,"deviceId":`...)
	dst = appendString(dst, r.deviceID)
	dst = append(dst, `,"managedBy":`...)
	dst = appendOptString(dst, id.managedBy)
	dst = append(dst, `,"generationId":`...)
	dst = appendString(dst, id.generationID)
	dst = append(dst, `,"etag":`...)
	dst = appendString(dst, identityEtag(id.etagVer))
	dst = appendConnection(dst, id)
	dst = append(dst, `,"connectionStateUpdatedTime":`...)
	dst = appendTime(dst, id.connUpdated)
	dst = append(dst, `,"lastActivityTime":`...)
	dst = appendTime(dst, id.lastActivity)
	dst = append(dst, `,"cloudToDeviceMessageCount":`...)
	dst = strconv.AppendInt(dst, c2dCount(r, wallNow()), 10)
	dst = append(dst, `,"authentication":`...)
	dst = appendAuth(dst, id)
	return append(dst, '}')
}

func appendConnection(dst []byte, id *identity) []byte {
	dst = append(dst, `,"connectionState":`...)
	if id.connected {
		return appendString(dst, StateConnected)
	}
	return appendString(dst, StateDisconnected)
}

func appendAuth(dst []byte, id *identity) []byte {
	dst = append(dst, `{"symmetricKey":{"primaryKey":`...)
	dst = appendOptString(dst, id.primaryKey)
	dst = append(dst, `,"secondaryKey":`...)
	dst = appendOptString(dst, id.secondaryKey)
	dst = append(dst, `},"x509Thumbprint":`...)
	dst = appendThumbs(dst, id)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, authNames[id.auth])
	return append(dst, '}')
}

func appendThumbs(dst []byte, id *identity) []byte {
	dst = append(dst, `{"primaryThumbprint":`...)
	dst = appendOptString(dst, id.primaryThumb)
	dst = append(dst, `,"secondaryThumbprint":`...)
	dst = appendOptString(dst, id.secondThumb)
	return append(dst, '}')
}

// appendOptString renders "" as null.
func appendOptString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

func statusName(s uint8) string {
	if s == statusDisabled {
		return "disabled"
	}
	return "enabled"
}
