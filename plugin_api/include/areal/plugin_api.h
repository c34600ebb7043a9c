/*
 * areal plugin ABI, umbrella header: include this one.
 * Version and rules: areal/abi.h and docs/plugin-abi-guidelines.md.
 */
#ifndef AREAL_PLUGIN_API_H_
#define AREAL_PLUGIN_API_H_

#include "areal/abi.h"
#include "areal/services.h"
#include "areal/tensors.h"
#include "areal/inference.h"
#include "areal/train.h"
#include "areal/algorithm.h"
#include "areal/workflow.h"
#include "areal/gateway.h"

#endif /* AREAL_PLUGIN_API_H_ */
