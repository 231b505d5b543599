// Command fetch is the team example's researcher, a sub-agent with http
// and nothing else: it fetches one page and returns its title, its text
// and its links. Told to follow a link outside its grant, it tries, as an
// agent would, and reports the host's refusal instead of the page.
package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is the page to fetch and, optionally, a link to follow too.
type Input struct {
	URL    string `json:"url"`
	Follow string `json:"follow,omitempty"`
}

// Output is what the page says.
type Output struct {
	URL     string   `json:"url"`
	Title   string   `json:"title"`
	Text    string   `json:"text"`
	Refused []string `json:"refused,omitempty"`
}

var (
	titleRE = regexp.MustCompile(`<title>([^<]*)</title>`)
	tagRE   = regexp.MustCompile(`<[^>]*>`)
	bodyRE  = regexp.MustCompile(`(?s)<body>(.*)</body>`)
)

// get fetches url; a GET changes nothing, so one left in doubt by a crash
// is asked again.
func get(url string) (*agent.HTTPResponse, error) {
	resp, err := agent.HTTPGet(url)
	if errors.Is(err, agent.ErrInDoubt) {
		resp, err = agent.HTTPGet(url)
	}
	if err != nil {
		return nil, err
	}
	if resp.Status != 200 {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.Status)
	}
	return resp, nil
}

func main() {
	agent.MainJSON(func(ctx context.Context, in Input) (*Output, error) {
		resp, err := get(in.URL)
		if err != nil {
			return nil, err
		}
		out := &Output{URL: in.URL}
		if m := titleRE.FindSubmatch(resp.Body); m != nil {
			out.Title = string(m[1])
		}
		body := resp.Body
		if m := bodyRE.FindSubmatch(body); m != nil {
			body = m[1]
		}
		out.Text = strings.Join(strings.Fields(tagRE.ReplaceAllString(string(body), " ")), " ")
		if in.Follow != "" {
			if _, err := get(in.Follow); err != nil {
				out.Refused = append(out.Refused, err.Error())
			}
		}
		return out, nil
	})
}
