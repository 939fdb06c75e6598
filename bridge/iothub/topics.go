package iothub

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	tw "github.com/smartgo/smartgo/twin"
)

// The device-facing MQTT names of IoT Hub (docs/iothub.md):
//
//	user name   {host}/{deviceId}[/{moduleId}]/?api-version=...[&DeviceClientType=...]
//	client id   {deviceId} or {deviceId}/{moduleId}
//	twin        $iothub/twin/GET/?$rid={rid}
//	            $iothub/twin/PATCH/properties/reported/?$rid={rid}[&$version={n}]
//	            $iothub/twin/res/{status}/?$rid={rid}[&$version={n}]       (to the device)
//	            $iothub/twin/PATCH/properties/desired/?$version={n}        (to the device)
//	methods     $iothub/methods/POST/{name}/?$rid={rid}                    (to the device)
//	            $iothub/methods/res/{status}/?$rid={rid}
//	telemetry   devices/{id}/messages/events/{property bag}
//	            devices/{id}/modules/{mid}/messages/events/{property bag}
//	C2D         devices/{id}/messages/devicebound/{property bag}          (to the device)
//
// A property bag is name=value pairs joined by '&', each side URL-encoded.

// Topic prefixes and filters.
const (
	methodResPrefix     = "$iothub/methods/res/"
	twinResFilter       = "$iothub/twin/res/#"
	twinDesiredFilter   = "$iothub/twin/PATCH/properties/desired/#"
	methodPostFilter    = "$iothub/methods/POST/#"
	twinGetFilter       = "$iothub/twin/GET/#"
	twinPatchFilter     = "$iothub/twin/PATCH/properties/reported/#"
	methodResFilter     = "$iothub/methods/res/#"
	reservedHubFilter   = "$iothub/#"
	reservedDevFilter   = "devices/#"
	eventsDeviceFilter  = "devices/+/messages/events/#"
	eventsModuleFilter  = "devices/+/modules/+/messages/events/#"
	maxRequestIDLen     = 128
	maxMethodNameLen    = 128
	desiredTopicPrefix  = "$iothub/twin/PATCH/properties/desired/?$version="
	twinResTopicPrefix  = "$iothub/twin/res/"
	methodPostTopicBase = "$iothub/methods/POST/"
)

// Identity names a device, or a module of a device.
type Identity struct {
	DeviceID string
	ModuleID string // "" for a device
}

// ClientID is the MQTT client id of the identity.
func (id Identity) ClientID() string { return tw.TwinKey(id.DeviceID, id.ModuleID) }

// Path is the identity's resource path, as SAS tokens name it:
// "/devices/{id}" or "/devices/{id}/modules/{mid}".
func (id Identity) Path() string {
	p := "/devices/" + id.DeviceID
	if id.ModuleID != "" {
		p += "/modules/" + id.ModuleID
	}
	return p
}

func (id Identity) String() string { return id.ClientID() }

// check applies the registry's id rules.
func (id Identity) check() error {
	if err := tw.CheckID(id.DeviceID, "deviceId"); err != nil {
		return err
	}
	if id.ModuleID != "" {
		return tw.CheckID(id.ModuleID, "moduleId")
	}
	return nil
}

// ParseUsername splits an IoT Hub MQTT user name into the host and the
// identity: "{host}/{deviceId}/?api-version=..." or
// "{host}/{deviceId}/{moduleId}/?...". The query (api-version,
// DeviceClientType; model-id is ModelID's) is not interpreted; older SDKs leave out
// the '?' ("{host}/{deviceId}/api-version=..."). ok is false for any
// other shape (not an IoT Hub device).
func ParseUsername(u string) (host string, id Identity, ok bool) {
	return parseUsername(u, "")
}

// parseUsername is ParseUsername for the connection of clientID ("":
// unknown), which settles a user name that reads two ways (splitUsername).
func parseUsername(u, clientID string) (host string, id Identity, ok bool) {
	parts, _ := splitUsername(u, clientID)
	switch len(parts) {
	case 2:
		id = Identity{DeviceID: parts[1]}
	case 3:
		id = Identity{DeviceID: parts[1], ModuleID: parts[2]}
	default:
		return "", Identity{}, false
	}
	if parts[0] == "" || id.check() != nil {
		return "", Identity{}, false
	}
	return parts[0], id, true
}

// splitUsername splits a user name into its path levels (host, device,
// module) and its query. Ids may hold '?' (the registry allows it, as IoT
// Hub does) but not '/', and the SDKs put the query after a '/' of its
// own ("{host}/a?b/?api-version=..."). When the user name's path is the
// connection's client id ("{host}/{clientID}") followed by nothing, '/',
// "/?" or "/api-version=", that settles it, so a module id starting with
// '?' ("{host}/d/?m/?api-version=...", client id "d/?m") is no query.
// Otherwise the query starts at the first level after the device's
// beginning with '?' or "api-version="; only a user name without such a
// level ("{host}/{deviceId}?api-version=...") has it cut at the last
// level's first '?'.
func splitUsername(u, clientID string) (path []string, query string) {
	if host, rest, ok := strings.Cut(u, "/"); ok && clientID != "" && strings.HasPrefix(rest, clientID) {
		switch tail := rest[len(clientID):]; {
		case tail == "" || tail == "/":
			return append([]string{host}, strings.Split(clientID, "/")...), ""
		case strings.HasPrefix(tail, "/?") || strings.HasPrefix(tail, "/api-version="):
			return append([]string{host}, strings.Split(clientID, "/")...), strings.TrimPrefix(tail[1:], "?")
		}
	}
	levels := strings.Split(u, "/")
	for i, l := range levels {
		if i > 1 && (strings.HasPrefix(l, "?") || strings.HasPrefix(l, "api-version=")) {
			return levels[:i], strings.TrimPrefix(strings.Join(levels[i:], "/"), "?")
		}
	}
	n := len(levels)
	if n > 1 && levels[n-1] == "" {
		levels, n = levels[:n-1], n-1 // a trailing '/'
	}
	last, q, found := strings.Cut(levels[n-1], "?")
	if found {
		levels[n-1], query = last, q
	}
	return levels, query
}

// ModelID returns the IoT Plug and Play model id an IoT Hub user name
// announces: the model-id parameter of its query
// ("{host}/{deviceId}/?api-version=...&model-id=dtmi:com:example:X;1&...";
// some SDKs percent-encode the value). ok is false when it announces
// none; the value is not checked (twin.CheckModelID does).
func ModelID(username string) (id string, ok bool, err error) {
	return modelID(username, "")
}

// modelID is ModelID for the connection of clientID (splitUsername).
func modelID(username, clientID string) (id string, ok bool, err error) {
	_, q := splitUsername(username, clientID)
	for pair := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k != "model-id" {
			continue
		}
		if id, err = url.PathUnescape(v); err != nil {
			return "", false, fmt.Errorf("%w: model-id %q: %w", ErrBadRequest, truncate(v, 64), err)
		}
		return id, id != "", nil
	}
	return "", false, nil
}

// ParseClientID splits a client id into device and module.
func ParseClientID(clientID string) (Identity, bool) {
	dev, mod, _ := strings.Cut(clientID, "/")
	id := Identity{DeviceID: dev, ModuleID: mod}
	if strings.Contains(mod, "/") || id.check() != nil {
		return Identity{}, false
	}
	return id, true
}

// topicQuery returns the raw value of key in the query part of a device
// topic ("$iothub/twin/GET/?$rid=7&x=y"): the text after "?", pairs split
// at '&'. Values stay as sent (they are echoed into reply topics).
func topicQuery(topic, key string) (string, bool) {
	_, q, ok := strings.Cut(topic, "?")
	if !ok {
		return "", false
	}
	for pair := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

// requestID returns the $rid of a device request topic; a missing or
// over-long one is an error.
func requestID(topic string) (string, error) {
	rid, ok := topicQuery(topic, "$rid")
	switch {
	case !ok || rid == "":
		return "", fmt.Errorf("%w: the topic has no $rid", ErrBadRequest)
	case len(rid) > maxRequestIDLen:
		return "", fmt.Errorf("%w: $rid of %d bytes (at most %d)", ErrBadRequest, len(rid), maxRequestIDLen)
	}
	return rid, nil
}

// versionParam returns the $version of a reported-properties PATCH topic
// (0 when absent): SmartGo's conditional update.
func versionParam(topic string) (int64, error) {
	v, ok := topicQuery(topic, "$version")
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: $version %q is not a positive integer", ErrBadRequest, truncate(v, 32))
	}
	return n, nil
}

// methodResponse parses "$iothub/methods/res/{status}/?$rid={rid}".
func methodResponse(topic string) (status int, rid string, err error) {
	rest := strings.TrimPrefix(topic, methodResPrefix)
	st, _, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, "", fmt.Errorf("%w: method response topic %q has no status level", ErrBadRequest, truncate(topic, 64))
	}
	status, err = strconv.Atoi(st)
	if err != nil || status < 0 || status > 999999 || st[0] == '+' || st[0] == '-' {
		return 0, "", fmt.Errorf("%w: method response status %q is not an integer", ErrBadRequest, truncate(st, 32))
	}
	rid, err = requestID(topic)
	return status, rid, err
}

// twinResponseTopic is the topic of a twin response.
func twinResponseTopic(status int, rid string, version int64) string {
	t := twinResTopicPrefix + strconv.Itoa(status) + "/?$rid=" + rid
	if version > 0 {
		t += "&$version=" + strconv.FormatInt(version, 10)
	}
	return t
}

// methodRequestTopic is the topic of a direct method request.
func methodRequestTopic(name, rid string) string {
	return methodPostTopicBase + name + "/?$rid=" + rid
}

// methodNameSeparators are the printable US-ASCII characters IoT Hub
// refuses in a method name (as in every property name of a method call),
// with '+' and '#', which cannot be in an MQTT topic level.
const methodNameSeparators = "$()<>@,;:\\\"/[]?={}+#"

// checkMethodName refuses what IoT Hub refuses as a method name: empty,
// over maxMethodNameLen bytes, or holding anything but printable US-ASCII
// (a space, a tab, a control or non-ASCII character) or one of
// methodNameSeparators. The device SDKs could not dispatch such a name:
// the Node SDK gets a space as %20 and never answers.
func checkMethodName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: methodName is empty", ErrBadRequest)
	case len(name) > maxMethodNameLen:
		return fmt.Errorf("%w: methodName of %d bytes (at most %d)", ErrBadRequest, len(name), maxMethodNameLen)
	case strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(methodNameSeparators, r) }):
		return fmt.Errorf("%w: methodName %q holds a character IoT Hub refuses (printable US-ASCII only, none of %s, no space)",
			ErrBadRequest, truncate(name, 64), methodNameSeparators)
	}
	return nil
}

// Property is one name=value pair of a property bag, decoded.
type Property struct{ Name, Value string }

// DecodeBag decodes a property bag ("%24.mid=1&temp=21"): pairs split at
// '&', each side percent-decoded ('+' stays '+'); a pair without '='
// has an empty value, empty pairs are skipped.
func DecodeBag(bag string) ([]Property, error) {
	var out []Property
	for pair := range strings.SplitSeq(bag, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.PathUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("%w: property name %q: %w", ErrBadRequest, truncate(k, 32), err)
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%w: property %q: %w", ErrBadRequest, truncate(name, 32), err)
		}
		if name == "" {
			return nil, fmt.Errorf("%w: property without a name", ErrBadRequest)
		}
		out = append(out, Property{name, value})
	}
	return out, nil
}

// EncodeBag encodes properties as a bag, in order.
func EncodeBag(props []Property) string {
	var b strings.Builder
	for i, p := range props {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(EncodeComponent(p.Name))
		b.WriteByte('=')
		b.WriteString(EncodeComponent(p.Value))
	}
	return b.String()
}

// EncodeComponent percent-encodes every byte but A-Z a-z 0-9 - _ . ~ (so
// the result holds no '/', '+', '#', '&', '=' or '$'), which every SDK's
// decoder takes back.
func EncodeComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// eventsIdentity returns the identity whose telemetry topic topic is.
func eventsIdentity(topic string) (Identity, string, bool) {
	rest, ok := strings.CutPrefix(topic, "devices/")
	if !ok {
		return Identity{}, "", false
	}
	dev, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return Identity{}, "", false
	}
	id := Identity{DeviceID: dev}
	if mrest, ok := strings.CutPrefix(rest, "modules/"); ok {
		mod, r, ok := strings.Cut(mrest, "/")
		if !ok {
			return Identity{}, "", false
		}
		id.ModuleID, rest = mod, r
	}
	bag, ok := strings.CutPrefix(rest, "messages/events/")
	if !ok && rest == "messages/events" {
		bag, ok = "", true
	}
	if !ok || id.check() != nil {
		return Identity{}, "", false
	}
	return id, strings.TrimSuffix(bag, "/"), true
}

// c2dTopic is the topic of a cloud-to-device message to a device.
func c2dTopic(deviceID string, props []Property) string {
	return "devices/" + deviceID + "/messages/devicebound/" + EncodeBag(props)
}
