/* vmad's <infiniband/umad_str.h>: names of classes, methods, attributes and status codes. */
#ifndef _UMAD_STR_H
#define _UMAD_STR_H

#include <infiniband/umad.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *umad_class_str(uint8_t mgmt_class);
const char *umad_method_str(uint8_t mgmt_class, uint8_t method);
const char *umad_attribute_str(uint8_t mgmt_class, __be16 attr_id);
const char *umad_common_mad_status_str(__be16 status);
const char *umad_sa_mad_status_str(__be16 status);

#ifdef __cplusplus
}
#endif
#endif /* _UMAD_STR_H */
