// `cleanup`: what the chart's cleanupOnUninstall hook runs.
#include <iostream>

#include "host/cmd/command.h"
#include "host/operator/cleanup.h"

namespace gpustack::cmd {

Command AddCleanup(CLI::App& root) {
  struct Flags {
    op::CleanupOptions options;
    bool keep_crds = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cleanup = root.add_subcommand(
      "cleanup",
      "Remove what the worker created at run time: webhook configurations, its Kueue objects, the "
      "InstanceTypes' finalizers, the CRDs, its Secrets (the chart's cleanupOnUninstall hook)");
  cleanup
      ->add_option("--namespace", flags->options.system_namespace,
                   "The system namespace the worker ran in")
      ->envname("KUBERNETES_POD_NAMESPACE")
      ->capture_default_str();
  cleanup->add_flag("--keep-crds", flags->keep_crds,
                    "Leave the operator's CRDs (and their objects)");
  return {
      cleanup, [flags] {
        auto client = ConnectToKubernetes();
        if (!client) return kBadInput;
        flags->options.crds = !flags->keep_crds;
        flags->options.progress = [](const std::string& line) { std::cout << line << std::endl; };
        const auto report = op::Cleanup(*client, flags->options);
        for (const std::string& problem : report.problems)
          std::cerr << "error: " << problem << "\n";
        std::cout << report.deleted << " object(s) deleted"
                  << (report.problems.empty()
                          ? ""
                          : ", " + std::to_string(report.problems.size()) + " could not be removed")
                  << std::endl;
        return Finish(report.problems.empty() ? 0 : 1);
      }};
}

}  // namespace gpustack::cmd
