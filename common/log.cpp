#include "common/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace surge {

Status init_logging(const std::string& level, const std::string& file, const std::string& name) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("unknown log level '" + level + "'");
  }
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (file.empty()) {
      logger = spdlog::stderr_color_mt(name);
    } else {
      logger = spdlog::basic_logger_mt(name, file);
    }
  } catch (const spdlog::spdlog_ex& e) {
    // spdlog reports failures by exception; turn them into a value here.
    return Status::IOError("open log '" + (file.empty() ? std::string("stderr") : file) +
                           "': " + e.what());
  }
  logger->set_level(lvl);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n %t] %v");
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  return Status::OK();
}

}  // namespace surge
