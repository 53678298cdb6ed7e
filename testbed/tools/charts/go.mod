// The subcharts of charts/gpustack-operator, taken from the Go modules their projects publish
// (scripts/chart-deps.sh packages them); go.sum pins their content.
module gpustack.invalid/testbed/charts

go 1.26.0

require (
	sigs.k8s.io/kueue v0.17.0
	sigs.k8s.io/node-feature-discovery v0.19.0
)
