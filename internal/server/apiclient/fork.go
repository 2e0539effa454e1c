package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// Fork forks a paused session of the server on its runner and returns the
// fork, paused.
func (c *Client) Fork(ctx context.Context, id string) (*api.ForkJSON, error) {
	var out api.ForkJSON
	return &out, c.call(ctx, http.MethodPost, api.PathSessions+"/"+url.PathEscape(id)+"/fork", nil, &out)
}
