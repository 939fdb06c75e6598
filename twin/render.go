package twin

import "strconv"

// appendTwinJSON renders the full twin document of a record, IoT Hub's
// shape: root identity fields, tags, properties.desired and
// properties.reported with $metadata and $version.
func appendTwinJSON(dst []byte, r *record) []byte {
	id := &r.id
	dst = append(dst, `{"deviceId":`...)
	dst = appendString(dst, r.deviceID)
	if r.isModule() {
		dst = append(dst, `,"moduleId":`...)
		dst = appendString(dst, r.moduleID)
	}
	dst = append(dst, `,"etag":`...)
	dst = appendString(dst, Etag(r.version))
	dst = append(dst, `,"deviceEtag":`...)
	dst = appendString(dst, identityEtag(id.etagVer))
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, statusName(id.status))
	if id.statusReason != "" {
		dst = append(dst, `,"statusReason":`...)
		dst = appendString(dst, id.statusReason)
	}
	dst = append(dst, `,"statusUpdateTime":`...)
	dst = appendTime(dst, id.statusUpdated)
	dst = appendConnection(dst, id)
	dst = append(dst, `,"lastActivityTime":`...)
	dst = appendTime(dst, id.lastActivity)
	dst = append(dst, `,"cloudToDeviceMessageCount":`...)
	dst = strconv.AppendInt(dst, c2dCount(r, wallNow()), 10)
	dst = append(dst, `,"authenticationType":`...)
	dst = appendString(dst, authNames[id.auth])
	dst = append(dst, `,"x509Thumbprint":`...)
	dst = appendThumbs(dst, id)
	dst = append(dst, `,"modelId":`...)
	dst = appendString(dst, id.modelID)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, r.version, 10)
	dst = append(dst, `,"tags":`...)
	dst = appendValue(dst, &r.tags)
	dst = append(dst, `,"properties":{"desired":`...)
	dst = appendSection(dst, &r.desired, metaDesired, true, r.desiredVer)
	dst = append(dst, `,"reported":`...)
	dst = appendSection(dst, &r.reported, metaReported, true, r.reportedVer)
	dst = append(dst, '}')
	if !r.isModule() {
		dst = append(dst, `,"capabilities":{"iotEdge":`...)
		dst = strconv.AppendBool(dst, id.iotEdge)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendPropertiesJSON renders what a device's twin GET returns: desired
// and reported with their $version, without tags and $metadata.
func appendPropertiesJSON(dst []byte, r *record) []byte {
	dst = append(dst, `{"desired":`...)
	dst = appendSection(dst, &r.desired, metaDesired, false, r.desiredVer)
	dst = append(dst, `,"reported":`...)
	dst = appendSection(dst, &r.reported, metaReported, false, r.reportedVer)
	return append(dst, '}')
}
