package ws

import (
	"mime"
	"net/http"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
)

// formContentTypes are the types a cross-site HTML form or a plain curl -d
// sends: their bodies are read as JSON, as every body was before content
// types, so that no existing client changes meaning.
var formContentTypes = map[string]bool{
	"text/plain":                        true,
	"application/x-www-form-urlencoded": true,
	"multipart/form-data":               true,
}

// bodyContentType returns the content type an HTTP publish records: empty
// for JSON (no Content-Type, a JSON type, or a form type), else the
// request's Content-Type as sent.
func bodyContentType(r *http.Request) (string, *wsproto.Error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" || event.IsJSONContentType(ct) {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", wsproto.NewError(wsproto.CodeBadFrame, err, "Content-Type: %q is not a media type: %v", truncate(ct, 64), err)
	}
	if formContentTypes[mt] {
		return "", nil
	}
	var o event.PublishOptions
	event.WithContentType(ct)(&o)
	if err := o.Validate(); err != nil {
		return "", errorOf(err, wsproto.CodeBadFrame)
	}
	return ct, nil
}
