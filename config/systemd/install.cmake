# Run by `cmake --install`: writes the systemd units with the paths of the
# prefix being installed to (which --prefix may change after configuring),
# then installs them. Set by the caller: JR_UNIT_SRC, JR_UNIT_OUT,
# JR_BINDIR_REL, JR_SYSTEMD_UNITDIR.
set(JR_BINDIR "${CMAKE_INSTALL_PREFIX}/${JR_BINDIR_REL}")
foreach(unit jobrunner-worker@.service jobrunner-scheduler.service)
  configure_file("${JR_UNIT_SRC}/${unit}.in" "${JR_UNIT_OUT}/${unit}" @ONLY)
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${JR_SYSTEMD_UNITDIR}" TYPE FILE
       FILES "${JR_UNIT_OUT}/${unit}")
endforeach()
