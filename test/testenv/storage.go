package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StoredAPIVersion is the apiVersion etcd holds the custom resource group/resource ns/name at, as
// kube-apiserver wrote it (read through etcd's JSON gateway): what a storage migration changes and
// no API read shows, since every read converts to the version asked for.
func (e *Env) StoredAPIVersion(t testing.TB, group, resource, ns, name string) string {
	t.Helper()
	key := fmt.Sprintf("/registry/%s/%s/%s/%s", group, resource, ns, name)
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	resp, err := http.Post(e.env.ControlPlane.Etcd.URL.String()+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("reading %s from etcd: %v", key, err)
	}
	defer resp.Body.Close()
	var got struct {
		KVs []struct {
			Value []byte `json:"value"` // base64 in JSON, as []byte is
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reading %s from etcd: %s %v", key, resp.Status, err)
	}
	if len(got.KVs) == 0 {
		t.Fatalf("etcd holds nothing at %s", key)
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(got.KVs[0].Value, &obj); err != nil {
		t.Fatalf("%s in etcd is not JSON: %v", key, err)
	}
	return obj.APIVersion
}

// StoreAt makes version the storage version of the CRD named crdName, as an upgrade (or a
// downgrade) of kiln's CRDs does.
func StoreAt(t testing.TB, c client.Client, crdName, version string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: crdName}, crd); err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
		return c.Update(context.Background(), crd)
	}); err != nil {
		t.Fatalf("storing %s at %s: %v", crdName, version, err)
	}
}
