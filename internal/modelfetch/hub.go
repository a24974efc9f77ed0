package modelfetch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// hub fetches every file of a Hugging Face Hub model, hf://<org>/<model>[@<revision>], through the
// Hub's HTTP API ($HF_ENDPOINT, default https://huggingface.co), with $HF_TOKEN for gated and
// private models.
func (f *fetcher) hub(ctx context.Context, u *url.URL) error {
	repo, rev, _ := strings.Cut(u.Host+u.Path, "@")
	repo = strings.Trim(repo, "/")
	if rev == "" {
		rev = "main"
	}
	if strings.Count(repo, "/") != 1 {
		return fmt.Errorf("want hf://<org>/<model>[@<revision>], not a repository %q", repo)
	}
	endpoint := strings.TrimSuffix(os.Getenv("HF_ENDPOINT"), "/")
	if endpoint == "" {
		endpoint = "https://huggingface.co"
	}
	var info struct {
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := f.hubGet(ctx, endpoint+"/api/models/"+repo+"/revision/"+url.PathEscape(rev), func(resp *http.Response) error {
		return json.NewDecoder(resp.Body).Decode(&info)
	}); err != nil {
		return err
	}
	if len(info.Siblings) == 0 {
		return fmt.Errorf("model %s at %s has no files", repo, rev)
	}
	for _, file := range info.Siblings {
		src := endpoint + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + file.Name
		if err := f.hubGet(ctx, src, func(resp *http.Response) error { return f.save(file.Name, resp.Body) }); err != nil {
			return fmt.Errorf("%s: %w", file.Name, err)
		}
	}
	return nil
}

// hubGet GETs src with the token and hands a 200 answer to use.
func (f *fetcher) hubGet(ctx context.Context, src string, use func(*http.Response) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	if token := os.Getenv("HF_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return use(resp)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("the Hub answered %s: a gated or private model needs HF_TOKEN in storage.secretName, with access granted", resp.Status)
	case http.StatusNotFound:
		return fmt.Errorf("the Hub answered %s: check the model name and revision", resp.Status)
	}
	return fmt.Errorf("the Hub answered %s", resp.Status)
}
