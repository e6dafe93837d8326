/* errors.c: error names and strings, and the thread's last error
 * (cudaGetLastError returns it once and resets it; cudaPeekAtLastError does
 * not reset). Every name of CUDA 13's cudaError enum is known; the strings of
 * the codes the fake can return are the native ones, the others fall back to
 * the name. */
#include "fake.h"

/* clang-format off */
#define FC_ERROR_NAMES(X) \
  X(cudaErrorInvalidValue) X(cudaErrorMemoryAllocation) X(cudaErrorInitializationError) \
  X(cudaErrorCudartUnloading) X(cudaErrorProfilerDisabled) \
  X(cudaErrorProfilerNotInitialized) X(cudaErrorProfilerAlreadyStarted) \
  X(cudaErrorProfilerAlreadyStopped) X(cudaErrorInvalidConfiguration) \
  X(cudaErrorInvalidPitchValue) X(cudaErrorInvalidSymbol) X(cudaErrorInvalidHostPointer) \
  X(cudaErrorInvalidDevicePointer) X(cudaErrorInvalidTexture) \
  X(cudaErrorInvalidTextureBinding) X(cudaErrorInvalidChannelDescriptor) \
  X(cudaErrorInvalidMemcpyDirection) X(cudaErrorAddressOfConstant) \
  X(cudaErrorTextureFetchFailed) X(cudaErrorTextureNotBound) \
  X(cudaErrorSynchronizationError) X(cudaErrorInvalidFilterSetting) \
  X(cudaErrorInvalidNormSetting) X(cudaErrorMixedDeviceExecution) \
  X(cudaErrorNotYetImplemented) X(cudaErrorMemoryValueTooLarge) X(cudaErrorStubLibrary) \
  X(cudaErrorInsufficientDriver) X(cudaErrorCallRequiresNewerDriver) \
  X(cudaErrorInvalidSurface) X(cudaErrorDuplicateVariableName) \
  X(cudaErrorDuplicateTextureName) X(cudaErrorDuplicateSurfaceName) \
  X(cudaErrorDevicesUnavailable) X(cudaErrorIncompatibleDriverContext) \
  X(cudaErrorMissingConfiguration) X(cudaErrorPriorLaunchFailure) \
  X(cudaErrorLaunchMaxDepthExceeded) X(cudaErrorLaunchFileScopedTex) \
  X(cudaErrorLaunchFileScopedSurf) X(cudaErrorSyncDepthExceeded) \
  X(cudaErrorLaunchPendingCountExceeded) X(cudaErrorInvalidDeviceFunction) \
  X(cudaErrorNoDevice) X(cudaErrorInvalidDevice) X(cudaErrorDeviceNotLicensed) \
  X(cudaErrorSoftwareValidityNotEstablished) X(cudaErrorStartupFailure) \
  X(cudaErrorInvalidKernelImage) X(cudaErrorDeviceUninitialized) \
  X(cudaErrorMapBufferObjectFailed) X(cudaErrorUnmapBufferObjectFailed) \
  X(cudaErrorArrayIsMapped) X(cudaErrorAlreadyMapped) X(cudaErrorNoKernelImageForDevice) \
  X(cudaErrorAlreadyAcquired) X(cudaErrorNotMapped) X(cudaErrorNotMappedAsArray) \
  X(cudaErrorNotMappedAsPointer) X(cudaErrorECCUncorrectable) X(cudaErrorUnsupportedLimit) \
  X(cudaErrorDeviceAlreadyInUse) X(cudaErrorPeerAccessUnsupported) X(cudaErrorInvalidPtx) \
  X(cudaErrorInvalidGraphicsContext) X(cudaErrorNvlinkUncorrectable) \
  X(cudaErrorJitCompilerNotFound) X(cudaErrorUnsupportedPtxVersion) \
  X(cudaErrorJitCompilationDisabled) X(cudaErrorUnsupportedExecAffinity) \
  X(cudaErrorUnsupportedDevSideSync) X(cudaErrorContained) X(cudaErrorInvalidSource) \
  X(cudaErrorFileNotFound) X(cudaErrorSharedObjectSymbolNotFound) \
  X(cudaErrorSharedObjectInitFailed) X(cudaErrorOperatingSystem) \
  X(cudaErrorInvalidResourceHandle) X(cudaErrorIllegalState) X(cudaErrorLossyQuery) \
  X(cudaErrorSymbolNotFound) X(cudaErrorNotReady) X(cudaErrorIllegalAddress) \
  X(cudaErrorLaunchOutOfResources) X(cudaErrorLaunchTimeout) \
  X(cudaErrorLaunchIncompatibleTexturing) X(cudaErrorPeerAccessAlreadyEnabled) \
  X(cudaErrorPeerAccessNotEnabled) X(cudaErrorSetOnActiveProcess) \
  X(cudaErrorContextIsDestroyed) X(cudaErrorAssert) X(cudaErrorTooManyPeers) \
  X(cudaErrorHostMemoryAlreadyRegistered) X(cudaErrorHostMemoryNotRegistered) \
  X(cudaErrorHardwareStackError) X(cudaErrorIllegalInstruction) \
  X(cudaErrorMisalignedAddress) X(cudaErrorInvalidAddressSpace) X(cudaErrorInvalidPc) \
  X(cudaErrorLaunchFailure) X(cudaErrorCooperativeLaunchTooLarge) \
  X(cudaErrorTensorMemoryLeak) X(cudaErrorNotPermitted) X(cudaErrorNotSupported) \
  X(cudaErrorSystemNotReady) X(cudaErrorSystemDriverMismatch) \
  X(cudaErrorCompatNotSupportedOnDevice) X(cudaErrorMpsConnectionFailed) \
  X(cudaErrorMpsRpcFailure) X(cudaErrorMpsServerNotReady) X(cudaErrorMpsMaxClientsReached) \
  X(cudaErrorMpsMaxConnectionsReached) X(cudaErrorMpsClientTerminated) \
  X(cudaErrorCdpNotSupported) X(cudaErrorCdpVersionMismatch) \
  X(cudaErrorStreamCaptureUnsupported) X(cudaErrorStreamCaptureInvalidated) \
  X(cudaErrorStreamCaptureMerge) X(cudaErrorStreamCaptureUnmatched) \
  X(cudaErrorStreamCaptureUnjoined) X(cudaErrorStreamCaptureIsolation) \
  X(cudaErrorStreamCaptureImplicit) X(cudaErrorCapturedEvent) \
  X(cudaErrorStreamCaptureWrongThread) X(cudaErrorTimeout) \
  X(cudaErrorGraphExecUpdateFailure) X(cudaErrorExternalDevice) \
  X(cudaErrorInvalidClusterSize) X(cudaErrorFunctionNotLoaded) \
  X(cudaErrorInvalidResourceType) X(cudaErrorInvalidResourceConfiguration) \
  X(cudaErrorUnknown) X(cudaSuccess)
/* clang-format on */

#define ENTER() fc_enter(__func__)

static const char *name_of(cudaError_t e) {
  switch (e) {
#define FC_X_CASE(n) \
  case n: return #n;
    FC_ERROR_NAMES(FC_X_CASE)
#undef FC_X_CASE
    default: return NULL;
  }
}

static const char *string_of(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge:
      return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorUnknown: return "unknown error";
    default: return name_of(e);
  }
}

const char *cudaGetErrorName(cudaError_t e) {
  ENTER();
  const char *s = name_of(e);
  fc_leave(cudaSuccess);
  return s ? s : "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t e) {
  ENTER();
  const char *s = string_of(e);
  fc_leave(cudaSuccess);
  return s ? s : "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
  ENTER();
  cudaError_t e = fc_take_last_error(1);
  fc_leave(cudaSuccess);
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  ENTER();
  cudaError_t e = fc_take_last_error(0);
  fc_leave(cudaSuccess);
  return e;
}
