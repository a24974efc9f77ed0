// Command httpscaler stands in, in kiln's tests, for the KEDA HTTP add-on's external scaler,
// whose module is not served here: it answers KEDA's external-scaler gRPC API (an external-push
// trigger) as the add-on's scaler does for an InterceptorRoute, with the number of requests the
// interceptor holds read from a file instead of counted — so a test "sends requests" by writing
// a number, and the real KEDA operator scales the service from zero and back.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
)

type scaler struct {
	pb.UnimplementedExternalScalerServer
	pendingFile string
	target      float64
}

// pending is the number in the file, 0 when it is absent.
func (s *scaler) pending() float64 {
	b, err := os.ReadFile(s.pendingFile)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return n
}

func metricName(ref *pb.ScaledObjectRef) string {
	return "http-" + ref.GetScalerMetadata()["interceptorRoute"] + "-concurrency"
}

func (s *scaler) IsActive(context.Context, *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	return &pb.IsActiveResponse{Result: s.pending() > 0}, nil
}

func (s *scaler) StreamIsActive(_ *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	for {
		if err := stream.Send(&pb.IsActiveResponse{Result: s.pending() > 0}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (s *scaler) GetMetricSpec(_ context.Context, ref *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{{MetricName: metricName(ref), TargetSizeFloat: s.target}}}, nil
}

func (s *scaler) GetMetrics(_ context.Context, req *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{{MetricName: metricName(req.GetScaledObjectRef()), MetricValueFloat: s.pending()}}}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address of the gRPC server")
	pendingFile := flag.String("pending-file", "", "file holding the number of requests waiting (absent: none)")
	target := flag.Float64("target", 100, "concurrent requests per replica")
	flag.Parse()
	if *pendingFile == "" {
		log.Fatal("--pending-file is required")
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterExternalScalerServer(srv, &scaler{pendingFile: *pendingFile, target: *target})
	fmt.Println("httpscaler listening on", l.Addr())
	log.Fatal(srv.Serve(l))
}
